"""Fixtures of the real-server suite: servers on loopback, the kneepoint binary, artifacts.

Each server is one process started once per session (vLLM's start-up takes a minute or two) and
stopped at the end; its log goes to target/real-servers/logs/. The servers' virtualenvs are made
by scripts/real_servers/install.sh; a server whose virtualenv is missing is skipped only when
REAL_SERVERS_OPTIONAL=1 (CI sets nothing, so a missing server fails there).
"""

import json
import os
import re
import subprocess
from pathlib import Path

import pytest

from servers import (  # noqa: F401
    GEMMA, LLAMA_SERVER, LOGS, ROOT, WORK, Server, exited_servers, free_port, http_get,
    start_infinity,
    start_litellm,
    start_llama_server, start_llamacpp, start_vllm, tiny_llama,
)

BIN = Path(os.environ.get("KNEEPOINT_BIN", ROOT / "target" / "debug" / "kneepoint"))


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
    if os.environ.get("REAL_SERVERS_VLLM_URL"):
        server = Running(os.environ["REAL_SERVERS_VLLM_URL"])
        server.tokenizer = tiny_llama() / "tokenizer.json"
        yield server
        return
    server = start_vllm(venv_python("vllm"))
    yield server
    server.stop()


@pytest.fixture(scope="session")
def llamacpp():
    if os.environ.get("REAL_SERVERS_LLAMACPP_URL"):
        server = Running(os.environ["REAL_SERVERS_LLAMACPP_URL"])
        server.tokenizer = GEMMA / "tokenizer.json"
        yield server
        return
    server = start_llamacpp(venv_python("llama"))
    yield server
    server.stop()


@pytest.fixture(scope="session")
def llama_server():
    """llama.cpp's own server (built by install.sh llama-server), four parallel slots."""
    if not LLAMA_SERVER.exists():
        if os.environ.get("REAL_SERVERS_OPTIONAL") == "1":
            pytest.skip(f"{LLAMA_SERVER} is missing (run scripts/real_servers/install.sh)")
        raise RuntimeError(f"{LLAMA_SERVER} is missing: run scripts/real_servers/install.sh")
    server = start_llama_server()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def litellm(vllm):
    """LiteLLM's proxy in front of the session's vLLM server."""
    server = start_litellm(venv_python("litellm"), vllm)
    yield server
    server.stop()


@pytest.fixture(scope="session")
def infinity():
    """infinity-emb serving the MiniLM embedding model (install.sh infinity)."""
    server = start_infinity(venv_python("infinity"))
    yield server
    server.stop()


def kneepoint(*args: str, timeout_s: float = 600) -> subprocess.CompletedProcess:
    """Runs the kneepoint binary; fails the test with its output when it exits non-zero."""
    if not BIN.exists():
        raise RuntimeError(f"{BIN} is missing: cargo build first (or set KNEEPOINT_BIN)")
    p = subprocess.run([str(BIN), *args], capture_output=True, text=True, timeout=timeout_s)
    if p.returncode != 0:
        raise AssertionError(f"kneepoint {' '.join(args)} exited {p.returncode}\n"
                             f"stdout:\n{p.stdout}\nstderr:\n{p.stderr}\n{exited_servers()}")
    return p


def sweep_levels(server, out: Path, isl: int, osl: int, levels: str, count: int,
                 *extra: str) -> list[list[dict]]:
    """`kneepoint sweep` of `server` at `levels` (e.g. "1,4"), `count` requests each; the
    profiling records of each level, in order."""
    kneepoint("sweep", "--url", server.url, "--concurrency", levels, "--request-count", str(count),
              "--isl", str(isl), "--osl", str(osl), "--tokenizer", str(server.tokenizer),
              "--artifact-dir", str(out), "--quiet", *extra)
    return [records(out / f"concurrency_{c}") for c in levels.split(",")]


def check_all_ok(levels: list[list[dict]], count: int) -> None:
    """Every level has `count` records and none failed."""
    for recs in levels:
        assert len(recs) == count
        bad = [r["error"] for r in recs if r["error"] is not None]
        assert not bad, bad[:3]


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
