"""kneepoint recommend creating SageMaker endpoints against moto's control plane (signatures
checked), with the data plane pointed at the built-in simulator (`kneepoint sim serve`
checking the same key's SigV4 signatures) by `endpoint_url`: each candidate's model, endpoint
configuration and endpoint are created, found InService, measured through the SageMaker
transport and deleted; after a Ctrl-C mid-level nothing is left either. A wrong secret fails
the candidates with the control plane's own error and creates nothing.
"""
import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from aws import ENV, boto, start_moto
from conftest import BIN
from servers import Server, free_port

IMAGE = "763104351884.dkr.ecr.us-east-1.amazonaws.com/vllm:0.19.1-gpu-py312-cu129-ubuntu22.04-sagemaker"


@pytest.fixture(scope="module")
def moto():
    server = start_moto("moto-sagemaker", ["sagemaker:*"])
    yield server
    server.stop()


@pytest.fixture(scope="module")
def sim(moto):
    """The data plane: the simulator speaking SageMaker's protocol, checking signatures made
    with moto's key (any endpoint name)."""
    port = free_port()
    server = Server("sim-sagemaker",
                    [str(BIN), "sim", "serve", "--port", str(port), "--profile", "fast",
                     "--time-scale", "1", "--sigv4-access-key-id", moto.key[0],
                     "--sigv4-secret-env", "SIM_SECRET"],
                    port, {"SIM_SECRET": moto.key[1]}, "/health", start_timeout_s=60)
    yield server
    server.stop()


def env(moto, secret=None) -> dict:
    e = {**os.environ, **ENV, "AWS_ACCESS_KEY_ID": moto.key[0],
         "AWS_SECRET_ACCESS_KEY": secret or moto.key[1]}
    for k in ("AWS_SESSION_TOKEN", "AWS_PROFILE"):
        e.pop(k, None)
    return e


def config(tmp_path: Path, moto, sim, request_count: int, levels: str) -> Path:
    text = f"""
objective = "cost"
artifact_dir = {json.dumps(str(tmp_path / "out"))}

[workload]
prompt_input_tokens_mean = 32
output_tokens_mean = 4

[sweep_params]
concurrency = [{levels}]
request_count = {request_count}

[[candidates]]
name = "vllm-sm"
instance_type = "ml.g4dn.xlarge"
price_per_hour = 0.736
endpoint = {{ endpoint_url = {json.dumps(sim.url)}, region = "us-east-1" }}
[candidates.deploy]
kind = "sagemaker"
ready_timeout_s = 120
[candidates.deploy.sagemaker]
image = {json.dumps(IMAGE)}
environment = {{ SM_VLLM_MAX_NUM_SEQS = "{{max_num_seqs}}", SM_VLLM_ENABLE_PREFIX_CACHING = "true" }}
execution_role_arn = "arn:aws:iam::123456789012:role/SageMakerRole"
api_url = {json.dumps(moto.url)}
poll_s = 0.2
[candidates.matrix]
max_num_seqs = [8, 32]
"""
    path = tmp_path / "rec.toml"
    path.write_text(text)
    return path


def leftovers(moto) -> dict:
    out = boto(moto, "print(json.dumps({"
                     "'endpoints': [e['EndpointName'] for e in sagemaker.list_endpoints()['Endpoints']],"
                     "'configs': [c['EndpointConfigName'] for c in sagemaker.list_endpoint_configs()['EndpointConfigs']],"
                     "'models': [m['ModelName'] for m in sagemaker.list_models()['Models']]}))",
               moto.key)
    return json.loads(out)


def test_endpoints_are_created_measured_and_deleted(moto, sim, tmp_path):
    cfg = config(tmp_path, moto, sim, 16, "2, 8")
    p = subprocess.run([str(BIN), "recommend", "--config", str(cfg)], capture_output=True,
                       text=True, timeout=600, env=env(moto))
    assert p.returncode == 0, p.stdout + p.stderr
    doc = json.loads((tmp_path / "out" / "recommendations.json").read_text())
    names = sorted(c["name"] for c in doc["candidates"])
    assert names == ["vllm-sm max_num_seqs=32", "vllm-sm max_num_seqs=8"], names
    for c in doc["candidates"]:
        assert c["point"] is not None and c["point"]["error_rate"] == 0.0, c
        d = c["deployment"]
        assert d.get("teardown_error") is None, d
        r = d["recipe"]
        assert r["kind"] == "sagemaker" and r["endpoint_name"].startswith("kneepoint-vllm-sm-")
        seqs = c["name"].rsplit("=", 1)[1]
        env_ = r["create_model"]["PrimaryContainer"]["Environment"]
        assert env_["SM_VLLM_MAX_NUM_SEQS"] == seqs, r
        assert r["create_endpoint_config"]["ProductionVariants"][0]["InstanceType"] == "ml.g4dn.xlarge"
        # Measured through the SageMaker transport: the level's records name the endpoint.
        folder = tmp_path / "out" / c["artifact_dir"]
        summary = json.loads((folder / "sweep_summary.json").read_text())
        assert summary["settings"]["sagemaker"]["endpoint_name"] == r["endpoint_name"], summary
    assert "the CreateModel, CreateEndpointConfig and CreateEndpoint requests" in p.stdout
    assert leftovers(moto) == {"endpoints": [], "configs": [], "models": []}


def test_ctrl_c_mid_level_deletes_the_endpoint(moto, sim, tmp_path):
    cfg = config(tmp_path, moto, sim, 100000, "4")
    child = subprocess.Popen([str(BIN), "recommend", "--quiet", "--config", str(cfg)],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             env=env(moto))
    records = (tmp_path / "out" / "candidate_vllm-sm_max_num_seqs_8" / "concurrency_4"
               / "profile_export.jsonl")
    deadline = time.monotonic() + 120
    while not (records.exists() and records.read_text().count("\n") >= 5):
        assert child.poll() is None, child.communicate()
        assert time.monotonic() < deadline, "the level never started"
        time.sleep(0.05)
    assert len(leftovers(moto)["endpoints"]) == 1
    child.send_signal(signal.SIGINT)
    out, err = child.communicate(timeout=120)
    assert child.returncode == 130, out + err
    assert leftovers(moto) == {"endpoints": [], "configs": [], "models": []}


def test_a_wrong_secret_creates_nothing_and_says_why(moto, sim, tmp_path):
    cfg = config(tmp_path, moto, sim, 8, "2")
    p = subprocess.run([str(BIN), "recommend", "--config", str(cfg)], capture_output=True,
                       text=True, timeout=300, env=env(moto, secret="not-the-secret"))
    # Nothing measured is nothing to recommend: exit 1, the reasons still written (issue 46).
    assert p.returncode == 1, p.stdout + p.stderr
    assert "no candidate was measured" in p.stderr, p.stderr
    doc = json.loads((tmp_path / "out" / "recommendations.json").read_text())
    for c in doc["candidates"]:
        assert c["rank"] is None
        assert "CreateModel failed (HTTP 403): SignatureDoesNotMatch" in c["explanation"], c
    assert "not-the-secret" not in p.stdout + p.stderr
    assert leftovers(moto) == {"endpoints": [], "configs": [], "models": []}
