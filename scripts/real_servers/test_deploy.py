"""kneepoint recommend launching vLLM CPU itself: one local-process candidate with a matrix of
three `--max-num-seqs` values and a fourth candidate with an engine flag vLLM refuses. Each
server is started, measured, stopped and ranked; afterwards no process of the run is left and
every port is free.
"""

import json
import os
import socket
import subprocess
import time
from pathlib import Path

from conftest import BIN, tiny_llama, venv_python

SEQS = (1, 4, 16)


def launched_by(launcher: int) -> list[int]:
    """Processes still running that the kneepoint process `launcher` launched (its tag)."""
    want = f"KNEEPOINT_DEPLOYMENT={launcher}:".encode()
    out = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            env = (entry / "environ").read_bytes()
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if state != "Z" and any(kv.startswith(want) for kv in env.split(b"\0")):
            out.append(int(entry.name))
    return out


def vllm_command(python: Path, model: Path, *extra: str) -> str:
    argv = [str(python), "-m", "vllm.entrypoints.openai.api_server", "--model", str(model),
            "--load-format", "dummy", "--served-model-name", "tiny", "--host", "127.0.0.1",
            "--port", "{port}", "--max-model-len", "4096", *extra]
    return json.dumps(argv)


def test_recommend_launches_measures_stops_and_ranks_vllm_servers(tmp_path):
    python = venv_python("vllm")
    model = tiny_llama()
    env = '{ VLLM_CPU_KVCACHE_SPACE = "1", VLLM_LOGGING_LEVEL = "WARNING" }'
    config = f"""
objective = "throughput"
artifact_dir = {json.dumps(str(tmp_path / "out"))}

[workload]
prompt_input_tokens_mean = 64
output_tokens_mean = 16
tokenizer = {json.dumps(str(model / "tokenizer.json"))}

[sweep_params]
concurrency = [1, 4, 16]
request_count = 32

[[candidates]]
name = "vllm"
instance_type = "cpu"
price_per_hour = 1.0
endpoint = {{ model = "tiny" }}
[candidates.deploy]
command = {vllm_command(python, model, "--max-num-seqs", "{max_num_seqs}")}
env = {env}
ready_timeout_s = 900
[candidates.deploy.kubernetes]
image = "vllm/vllm-openai:v0.11.0"
command = "vllm serve /models/tiny --served-model-name tiny --host {{host}} --port {{port}} --max-num-seqs {{max_num_seqs}}"
gpus = 1
[candidates.matrix]
max_num_seqs = [{", ".join(map(str, SEQS))}]

[[candidates]]
name = "vllm-bad-flag"
instance_type = "cpu"
price_per_hour = 1.0
endpoint = {{ model = "tiny" }}
[candidates.deploy]
command = {vllm_command(python, model, "--no-such-engine-flag")}
env = {env}
ready_timeout_s = 900
"""
    (tmp_path / "rec.toml").write_text(config)
    started = time.monotonic()
    p = subprocess.Popen([str(BIN), "recommend", "--config", str(tmp_path / "rec.toml")],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    out, err = p.communicate(timeout=3600)
    assert p.returncode == 0, f"exit {p.returncode}\nstdout:\n{out}\nstderr:\n{err}"
    print(f"recommendation of {len(SEQS) + 1} launched vLLM candidates: "
          f"{time.monotonic() - started:.0f} s")
    doc = json.loads((tmp_path / "out" / "recommendations.json").read_text())
    by_name = {c["name"]: c for c in doc["candidates"]}

    # The bad flag fails its candidate with vLLM's own words; the three others rank.
    bad = by_name["vllm-bad-flag"]
    assert bad["rank"] is None, bad
    assert "unrecognized arguments: --no-such-engine-flag" in bad["explanation"], bad
    names = [f"vllm max_num_seqs={n}" for n in SEQS]
    ranked = [c for c in doc["candidates"] if c["rank"] is not None]
    assert sorted(c["name"] for c in ranked) == sorted(names), doc["candidates"]

    # The ranking agrees with each configuration's measured throughput.
    tput = [c["point"]["output_token_throughput"] for c in ranked]
    assert tput == sorted(tput, reverse=True), [(c["name"], c["point"]) for c in ranked]
    # A batch of one cannot use the levels above one: its operating point sits lower, and the
    # largest batch carries more than it.
    one, most = by_name[names[0]], by_name[names[-1]]
    assert one["point"]["concurrency"] < most["point"]["concurrency"], (one, most)
    assert most["point"]["output_token_throughput"] > one["point"]["output_token_throughput"]

    # Every launch is recorded and was torn down; the winner's command line is printed.
    for n in names:
        d = by_name[n]["deployment"]
        assert d.get("teardown_error") is None, d
        assert f"--max-num-seqs {n.rsplit('=', 1)[1]}" in d["recipe"]["command"], d
        port = int(d["recipe"]["ready"].rsplit(":", 1)[1].split("/")[0])
        with socket.socket() as s:
            s.bind(("127.0.0.1", port))  # free again
    assert f"deploy {ranked[0]['name']} with: " in out, out
    assert launched_by(p.pid) == [], "a server of the run is still running"
    assert os.path.exists(tmp_path / "out" / "report.html")

    # Each launched candidate is also written as Kubernetes manifests that pass strict schema
    # validation (unknown fields refused), and its recipe carries them.
    for n in names:
        folder = tmp_path / "out" / by_name[n]["artifact_dir"] / "kubernetes"
        files = sorted(folder.glob("*.json"))
        assert [f.name for f in files] == ["deployment.json", "service.json"], files
        validate(*files)
        kinds = [m["kind"] for m in by_name[n]["deployment"]["recipe"]["kubernetes"]]
        assert kinds == ["Deployment", "Service"], kinds
        args = json.loads(files[0].read_text())["spec"]["template"]["spec"]["containers"][0]
        assert args["command"][-2:] == ["--max-num-seqs", n.rsplit("=", 1)[1]], args


def validate(*files: Path) -> None:
    """kubernetes-validate --strict against Kubernetes 1.33 (k8s-openapi's v1_33)."""
    tool = Path(venv_python("vllm")).parent / "kubernetes-validate"
    r = subprocess.run([str(tool), "--strict", "-k", "1.33", *map(str, files)],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "WARN" not in r.stdout + r.stderr, r.stdout + r.stderr


def test_the_sharded_sweep_job_passes_strict_schema_validation(tmp_path):
    p = subprocess.run([str(BIN), "k8s", "job", "--shards", "4", "--pvc", "results", "--",
                        "--url", "http://vllm:8000", "--concurrency", "64,256"],
                       capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    (tmp_path / "job.json").write_text(p.stdout)
    validate(tmp_path / "job.json")
