"""Fixtures of the real-server suite: servers on loopback, the kneepoint binary, artifacts.

Each server is one process started once per session (vLLM's start-up takes a minute or two) and
stopped at the end; its log goes to target/real-servers/logs/. The servers' virtualenvs are made
by scripts/real_servers/install.sh; a server whose virtualenv is missing is skipped only when
REAL_SERVERS_OPTIONAL=1 (CI sets nothing, so a missing server fails there).
"""

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
WORK = Path(os.environ.get("REAL_SERVERS_DIR", ROOT / "target" / "real-servers"))
LOGS = WORK / "logs"
BIN = Path(os.environ.get("KNEEPOINT_BIN", ROOT / "target" / "debug" / "kneepoint"))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def http_get(url: str, timeout: float = 5.0) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


class Server:
    """A server process on a loopback port, its log file and its base URL."""

    def __init__(self, name: str, argv: list[str], port: int, env: dict, ready_path: str,
                 start_timeout_s: float):
        LOGS.mkdir(parents=True, exist_ok=True)
        self.name, self.port = name, port
        self.url = f"http://127.0.0.1:{port}"
        self.log_path = LOGS / f"{name}.log"
        self.log = open(self.log_path, "wb")
        self.proc = subprocess.Popen(argv, stdout=self.log, stderr=subprocess.STDOUT,
                                     env={**os.environ, **env}, start_new_session=True)
        try:
            self._wait_ready(ready_path, start_timeout_s)
        except BaseException:
            self.stop()
            raise

    def _wait_ready(self, ready_path: str, start_timeout_s: float) -> None:
        deadline = time.monotonic() + start_timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"{self.name} exited with {self.proc.returncode}; see "
                                   f"{self.log_path}:\n" + self.tail())
            try:
                if http_get(self.url + ready_path, timeout=2)[0] == 200:
                    return
            except OSError:
                pass
            time.sleep(1)
        raise RuntimeError(f"{self.name} did not answer {ready_path} within "
                           f"{start_timeout_s:.0f} s:\n" + self.tail())

    def tail(self, lines: int = 30) -> str:
        return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])

    def stop(self) -> None:
        """Ends the whole process group (vLLM's engine runs in a child process), even when the
        leader has already exited."""
        for sig, wait in [(signal.SIGTERM, 30), (signal.SIGKILL, 10)]:
            try:
                os.killpg(self.proc.pid, sig)
            except ProcessLookupError:
                break
            try:
                self.proc.wait(wait)
                os.killpg(self.proc.pid, 0)  # anyone left in the group?
                time.sleep(1)
            except ProcessLookupError:
                break
            except subprocess.TimeoutExpired:
                continue
        self.log.close()


def venv_python(name: str) -> Path:
    py = WORK / f"venv-{name}" / "bin" / "python"
    if not py.exists():
        if os.environ.get("REAL_SERVERS_OPTIONAL") == "1":
            pytest.skip(f"{py} is missing (run scripts/real_servers/install.sh)")
        raise RuntimeError(f"{py} is missing: run scripts/real_servers/install.sh first")
    return py


class Running:
    """A server someone else started (REAL_SERVERS_<NAME>_URL), for quick iterations."""

    def __init__(self, url: str):
        self.url = url.rstrip("/")


@pytest.fixture(scope="session")
def vllm():
    model = WORK / "models" / "tiny-llama"
    subprocess.run([sys.executable, str(Path(__file__).with_name("make_model.py")), str(model)],
                   check=True)
    if os.environ.get("REAL_SERVERS_VLLM_URL"):
        server = Running(os.environ["REAL_SERVERS_VLLM_URL"])
        server.tokenizer = model / "tokenizer.json"
        yield server
        return
    py = venv_python("vllm")
    port = free_port()
    server = Server(
        "vllm",
        [str(py), "-m", "vllm.entrypoints.openai.api_server", "--model", str(model),
         "--load-format", "dummy", "--served-model-name", "tiny", "--host", "127.0.0.1",
         "--port", str(port), "--max-model-len", "4096", "--max-num-seqs", "64"],
        port,
        {"VLLM_CPU_KVCACHE_SPACE": "1", "VLLM_LOGGING_LEVEL": "WARNING"},
        "/v1/models",
        start_timeout_s=600,
    )
    server.tokenizer = model / "tokenizer.json"
    yield server
    server.stop()


@pytest.fixture(scope="session")
def llamacpp():
    model = WORK / "models" / "gemma3-270m"
    if os.environ.get("REAL_SERVERS_LLAMACPP_URL"):
        server = Running(os.environ["REAL_SERVERS_LLAMACPP_URL"])
        server.tokenizer = model / "tokenizer.json"
        yield server
        return
    py = venv_python("llama")
    gguf = str(model / "model.gguf")
    port = free_port()
    server = Server(
        "llamacpp",
        [str(py), "-m", "llama_cpp.server", "--model", gguf, "--host", "127.0.0.1",
         "--port", str(port), "--chat_format", "gemma", "--interrupt_requests", "False",
         "--n_ctx", "2048", "--n_threads", "1"],
        port,
        {},
        "/v1/models",
        start_timeout_s=180,
    )
    server.tokenizer = model / "tokenizer.json"
    yield server
    server.stop()


def kneepoint(*args: str, timeout_s: float = 600) -> subprocess.CompletedProcess:
    """Runs the kneepoint binary; fails the test with its output when it exits non-zero."""
    if not BIN.exists():
        raise RuntimeError(f"{BIN} is missing: cargo build first (or set KNEEPOINT_BIN)")
    p = subprocess.run([str(BIN), *args], capture_output=True, text=True, timeout=timeout_s)
    if p.returncode != 0:
        raise AssertionError(f"kneepoint {' '.join(args)} exited {p.returncode}\n"
                             f"stdout:\n{p.stdout}\nstderr:\n{p.stderr}")
    return p


def records(level_dir: Path) -> list[dict]:
    """The profiling records of one level's profile_export.jsonl."""
    lines = (level_dir / "profile_export.jsonl").read_text().splitlines()
    out = [json.loads(l) for l in lines if l.strip()]
    return [r for r in out if r["metadata"]["benchmark_phase"] == "profiling"]


def metric(rec: dict, name: str):
    m = (rec.get("metrics") or {}).get(name)
    return m["value"] if isinstance(m, dict) else m


def scrape(url: str) -> dict[str, float]:
    """A Prometheus text page summed over label sets: {name: value} (test-side only)."""
    _, body = http_get(url + "/metrics")
    out: dict[str, float] = {}
    for line in body.decode().splitlines():
        if not line or line.startswith("#"):
            continue
        m = re.match(r"^([A-Za-z_:][A-Za-z0-9_:]*)(\{[^}]*\})?\s+(\S+)", line)
        if m:
            try:
                out[m.group(1)] = out.get(m.group(1), 0.0) + float(m.group(3))
            except ValueError:
                pass
    return out
