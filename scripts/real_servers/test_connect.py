"""kneepoint through a real TLS front and a real forward proxy: nginx (Debian's package) with a
private CA we generate, terminating TLS, mutual TLS and HTTP/2 in front of the built-in
simulator and of vLLM CPU; tinyproxy (Debian's package) as the HTTP proxy, plain and CONNECT.

Certificates come from the openssl command line; nginx and tinyproxy run as processes of their
own on loopback ports (config and logs under the test's temporary folder).
"""

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from conftest import BIN, LOGS, Server, free_port, kneepoint, metric, records

NGINX = shutil.which("nginx") or "/usr/sbin/nginx"
TINYPROXY = shutil.which("tinyproxy") or "/usr/bin/tinyproxy"


def openssl(*args, cwd):
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    d = tmp_path_factory.mktemp("pki")
    openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj",
            "/CN=kneepoint test CA", "-keyout", "ca.key", "-out", "ca.pem", cwd=d)
    # Version 3 certificates (extensions present): webpki rejects version 1.
    (d / "server.ext").write_text("subjectAltName=DNS:localhost,IP:127.0.0.1\n"
                                  "extendedKeyUsage=serverAuth\n")
    (d / "client.ext").write_text("extendedKeyUsage=clientAuth\n")
    for name in ["server", "client"]:
        ext = ["-extfile", f"{name}.ext"]
        openssl("req", "-newkey", "rsa:2048", "-nodes", "-subj", f"/CN={name}", "-keyout",
                f"{name}.key", "-out", f"{name}.csr", cwd=d)
        openssl("x509", "-req", "-in", f"{name}.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
                "-CAcreateserial", "-days", "2", "-out", f"{name}.pem", *ext, cwd=d)
    return d


@pytest.fixture(scope="module")
def simulator():
    port = free_port()
    server = Server("sim-behind-nginx",
                    [str(BIN), "sim", "serve", "--port", str(port), "--profile", "fast",
                     "--time-scale", "1"],
                    port, {}, "/v1/models", start_timeout_s=60)
    yield server
    server.stop()


class Daemon:
    """A foreground daemon of Debian's (nginx, tinyproxy) on loopback ports."""

    def start(self, argv, ports, what):
        import socket
        import time
        self.proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
        for _ in range(100):
            if self.proc.poll() is not None:
                break
            try:
                for port in ports:
                    socket.create_connection(("127.0.0.1", port), 0.2).close()
                return
            except OSError:
                time.sleep(0.1)
        self.stop()
        raise RuntimeError(f"{what} did not start")

    def stop(self):
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


class Nginx(Daemon):
    def __init__(self, pki: Path, upstream: str, work: Path):
        self.tls, self.mtls = free_port(), free_port()
        self.access_log = work / "access.log"
        (work / "logs").mkdir(parents=True, exist_ok=True)
        conf = f"""
daemon off;
worker_processes 1;
pid {work}/nginx.pid;
error_log {LOGS}/nginx-error.log info;
events {{ worker_connections 512; }}
http {{
  log_format proto '$server_port $server_protocol $status $ssl_client_verify';
  access_log {self.access_log} proto;
  client_body_temp_path {work}/body; proxy_temp_path {work}/proxy;
  fastcgi_temp_path {work}/fcgi; uwsgi_temp_path {work}/uwsgi; scgi_temp_path {work}/scgi;
  upstream backend {{ server {upstream}; keepalive 32; }}
  proxy_http_version 1.1;
  proxy_set_header Connection "";
  proxy_buffering off;
  proxy_read_timeout 300s;
  ssl_certificate {pki}/server.pem;
  ssl_certificate_key {pki}/server.key;
  server {{
    listen 127.0.0.1:{self.tls} ssl http2;
    location / {{ proxy_pass http://backend; }}
  }}
  server {{
    listen 127.0.0.1:{self.mtls} ssl http2;
    ssl_client_certificate {pki}/ca.pem;
    ssl_verify_client on;
    location / {{ proxy_pass http://backend; }}
  }}
}}
"""
        (work / "nginx.conf").write_text(conf)
        self.start([NGINX, "-p", str(work), "-c", str(work / "nginx.conf")],
                   [self.tls, self.mtls], "nginx (see " + str(LOGS / "nginx-error.log") + ")")

    def protocols(self, port: int) -> list[str]:
        return [l.split()[1] for l in self.access_log.read_text().splitlines()
                if l.split()[0] == str(port)]



@pytest.fixture(scope="module")
def front(pki, simulator, tmp_path_factory):
    n = Nginx(pki, simulator.url.removeprefix("http://"), tmp_path_factory.mktemp("nginx"))
    yield n
    n.stop()


def sweep(url, out, *extra, check=True):
    args = ["sweep", "--url", url, "--model", "sim", "--concurrency", "1,4", "--request-count",
            "8", "--isl", "32", "--osl", "8", "--artifact-dir", str(out), "--quiet", *extra]
    if not check:
        return subprocess.run([str(BIN), *args], capture_output=True, text=True, timeout=300)
    kneepoint(*args)
    for c in (1, 4):
        recs = records(out / f"concurrency_{c}")
        assert len(recs) == 8 and all(r["error"] is None for r in recs)


def test_private_ca_is_trusted_only_when_given(front, pki, tmp_path):
    url = f"https://localhost:{front.tls}"
    p = sweep(url, tmp_path / "untrusted", check=False)
    assert p.returncode != 0
    assert "certificate" in (p.stderr + p.stdout).lower(), p.stderr
    sweep(url, tmp_path / "trusted", "--ca-bundle", str(pki / "ca.pem"))
    assert set(front.protocols(front.tls)) == {"HTTP/1.1"}


def test_connection_timings_show_the_tls_handshake(front, pki, tmp_path):
    """Each request's connection setup through nginx's TLS: a request that waited for a new
    connection reports DNS (localhost), TCP connect and a TLS handshake; the others report the
    connection reused, with zeros; the level's aggregates carry them under AIPerf's names."""
    out = tmp_path / "timings"
    sweep(f"https://localhost:{front.tls}", out, "--ca-bundle", str(pki / "ca.pem"))
    recs = records(out / "concurrency_1") + records(out / "concurrency_4")
    fresh = [r for r in recs if metric(r, "http_req_connection_reused") == 0]
    reused = [r for r in recs if metric(r, "http_req_connection_reused") == 1]
    assert len(fresh) + len(reused) == len(recs) == 16
    assert fresh and len(reused) >= 8, (len(fresh), len(reused))
    for r in fresh:
        dns, tcp, tls = (metric(r, f"http_req_{k}") for k in
                         ("dns_lookup", "connecting", "tls_handshaking"))
        assert dns > 0 and tcp > 0 and tls > 0, r["metrics"]
        assert abs(metric(r, "http_req_connection_overhead") - (dns + tcp + tls)) < 1e-6
        assert metric(r, "http_req_connection_overhead") < metric(r, "time_to_first_token")
    for r in reused:
        assert metric(r, "http_req_connection_overhead") == 0
    summary = json.loads((out / "concurrency_4" / "profile_export_aiperf.json").read_text())
    assert summary["http_req_tls_handshaking"]["unit"] == "ms"
    handshakes = [metric(r, "http_req_tls_handshaking") for r in fresh]
    print(f"TLS handshakes through nginx (ms): {sorted(round(h, 2) for h in handshakes)}")


def test_insecure_skips_verification_with_a_warning(front, tmp_path):
    p = subprocess.run([str(BIN), "sweep", "--url", f"https://127.0.0.1:{front.tls}", "--model",
                        "sim", "--concurrency", "1", "--request-count", "2", "--isl", "16",
                        "--osl", "4", "--artifact-dir", str(tmp_path / "x"), "--quiet",
                        "--insecure"], capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    assert "verification is OFF" in p.stderr
    assert all(r["error"] is None for r in records(tmp_path / "x" / "concurrency_1"))


def test_mutual_tls_needs_the_client_certificate(front, pki, tmp_path):
    url = f"https://localhost:{front.mtls}"
    ca = ["--ca-bundle", str(pki / "ca.pem")]
    p = sweep(url, tmp_path / "anonymous", *ca, check=False)
    assert p.returncode != 0 or any(
        r["error"] for r in records(tmp_path / "anonymous" / "concurrency_1")), p.stdout
    sweep(url, tmp_path / "mtls", *ca, "--client-cert", str(pki / "client.pem"),
          "--client-key", str(pki / "client.key"))


def test_http2_is_used_when_offered(front, pki, tmp_path):
    before = len(front.protocols(front.tls))
    sweep(f"https://localhost:{front.tls}", tmp_path / "h2", "--ca-bundle", str(pki / "ca.pem"),
          "--http2")
    assert set(front.protocols(front.tls)[before:]) == {"HTTP/2.0"}


def test_vllm_behind_tls_with_http2(vllm, pki, tmp_path_factory, tmp_path):
    n = Nginx(pki, vllm.url.removeprefix("http://"), tmp_path_factory.mktemp("nginx-vllm"))
    try:
        out = tmp_path / "vllm"
        kneepoint("sweep", "--url", f"https://localhost:{n.mtls}", "--concurrency", "4",
                  "--request-count", "8", "--isl", "64", "--osl", "16", "--tokenizer",
                  str(vllm.tokenizer), "--ca-bundle", str(pki / "ca.pem"), "--client-cert",
                  str(pki / "client.pem"), "--client-key", str(pki / "client.key"), "--http2",
                  "--artifact-dir", str(out), "--quiet")
        recs = records(out / "concurrency_4")
        assert len(recs) == 8 and all(r["error"] is None for r in recs)
        assert all(r["metadata"]["output_tokens_source"] == "usage" for r in recs)
        assert set(n.protocols(n.mtls)) == {"HTTP/2.0"}
    finally:
        n.stop()


class Tinyproxy(Daemon):
    def __init__(self, work: Path):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = work / "tinyproxy.log"
        (work / "tinyproxy.conf").write_text(
            f"Port {self.port}\nListen 127.0.0.1\nTimeout 600\nLogFile \"{self.log}\"\n"
            "LogLevel Connect\nMaxClients 200\nAllow 127.0.0.1\nDisableViaHeader Yes\n")
        self.start([TINYPROXY, "-d", "-c", str(work / "tinyproxy.conf")], [self.port], "tinyproxy")

    def lines(self, word: str) -> int:
        return sum(word in l for l in self.log.read_text(errors="replace").splitlines())



@pytest.fixture(scope="module")
def proxy(tmp_path_factory):
    p = Tinyproxy(tmp_path_factory.mktemp("tinyproxy"))
    yield p
    p.stop()


def run_with_env(url, out, env, *extra):
    import os
    base = {k: v for k, v in os.environ.items() if "proxy" not in k.lower()}
    p = subprocess.run([str(BIN), "sweep", "--url", url, "--model", "sim", "--concurrency", "2",
                        "--request-count", "4", "--isl", "16", "--osl", "4", "--artifact-dir",
                        str(out), "--quiet", *extra],
                       capture_output=True, text=True, timeout=300, env={**base, **env})
    return p


def all_ok(out, c=2):
    recs = records(out / f"concurrency_{c}")
    return len(recs) == 4 and all(r["error"] is None for r in recs)


def test_http_proxy_from_the_environment(proxy, simulator, tmp_path):
    before = proxy.lines("Established connection")
    p = run_with_env(simulator.url, tmp_path / "p", {"HTTP_PROXY": proxy.url})
    assert p.returncode == 0, p.stderr
    assert all_ok(tmp_path / "p")
    # The readiness probe and the level's connections went through the proxy.
    assert proxy.lines("Established connection") > before


def test_https_through_a_connect_tunnel(proxy, front, pki, tmp_path):
    before = proxy.lines("Established connection")
    p = run_with_env(f"https://localhost:{front.tls}", tmp_path / "t",
                     {"HTTPS_PROXY": proxy.url}, "--ca-bundle", str(pki / "ca.pem"))
    assert p.returncode == 0, p.stderr
    assert all_ok(tmp_path / "t")
    assert proxy.lines("Established connection") > before


def test_no_proxy_and_proxy_none_go_direct(simulator, tmp_path):
    dead = "http://127.0.0.1:1"
    p = run_with_env(simulator.url, tmp_path / "dead", {"HTTP_PROXY": dead})
    assert p.returncode != 0 and "through proxy 127.0.0.1:1" in p.stderr, p.stderr
    p = run_with_env(simulator.url, tmp_path / "no", {"HTTP_PROXY": dead, "NO_PROXY": "127.0.0.1"})
    assert p.returncode == 0, p.stderr
    assert all_ok(tmp_path / "no")
    p = run_with_env(simulator.url, tmp_path / "off", {"HTTP_PROXY": dead}, "--proxy", "none")
    assert p.returncode == 0, p.stderr
    assert all_ok(tmp_path / "off")


def test_explicit_proxy_flag_with_credentials_that_never_show(proxy, simulator, tmp_path):
    before = proxy.lines("Established connection")
    url = proxy.url.replace("http://", "http://alice:s3cret@")
    p = run_with_env(simulator.url, tmp_path / "flag", {}, "--proxy", url)
    assert p.returncode == 0, p.stderr
    assert all_ok(tmp_path / "flag")
    assert proxy.lines("Established connection") > before
    for f in (tmp_path / "flag").rglob("*"):
        if f.is_file():
            assert "s3cret" not in f.read_text(errors="replace"), f
