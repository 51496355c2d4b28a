"""Issue 19 against moto's S3 server on loopback: `kneepoint sweep --output-s3` uploads the
artifact folder's archive (one PutObject), `kneepoint archive --s3-part-size-mib 5` a larger
folder as a multipart upload; both are read back with boto3 and compared byte for byte."""
import os
import subprocess
from pathlib import Path

import pytest

from conftest import WORK, kneepoint
from servers import Server, free_port

BUCKET = "kneepoint-ci"
ENV = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
       "AWS_REGION": "us-east-1"}


def moto_python() -> Path:
    py = WORK / "venv-moto" / "bin" / "python"
    if not py.exists():
        if os.environ.get("REAL_SERVERS_OPTIONAL") == "1":
            pytest.skip(f"{py} is missing (run scripts/real_servers/install.sh s3)")
        raise RuntimeError(f"{py} is missing: run scripts/real_servers/install.sh s3 first")
    return py


def boto(server, code: str) -> bytes:
    """Runs `code` with `s3` (a boto3 client of the moto server) in moto's venv; its stdout."""
    prelude = ("import boto3, sys\n"
               f"s3 = boto3.client('s3', endpoint_url={server.url!r}, region_name='us-east-1',"
               " aws_access_key_id='testing', aws_secret_access_key='testing')\n")
    p = subprocess.run([str(moto_python()), "-c", prelude + code], capture_output=True,
                       timeout=120, env={**os.environ, **ENV})
    assert p.returncode == 0, p.stderr.decode()
    return p.stdout


@pytest.fixture(scope="module")
def moto(tmp_path_factory):
    py = moto_python()
    port = free_port()
    server = Server("moto", [str(py.parent / "moto_server"), "-H", "127.0.0.1", "-p", str(port)],
                    port, ENV, "/", start_timeout_s=120)
    boto(server, f"s3.create_bucket(Bucket={BUCKET!r})")
    yield server
    server.stop()


@pytest.fixture(autouse=True)
def aws_env(monkeypatch):
    for k, v in ENV.items():
        monkeypatch.setenv(k, v)


def read_back(server, key: str) -> bytes:
    return boto(server, f"sys.stdout.buffer.write(s3.get_object(Bucket={BUCKET!r}, "
                        f"Key={key!r})['Body'].read())")


def test_a_sweep_uploads_its_archive(moto, tmp_path):
    out = tmp_path / "sweep-run"
    p = kneepoint("sweep", "--sim-profile", "fast", "--sim-time-scale", "1", "--concurrency",
                  "1,4", "--request-count", "8", "--isl", "32", "--osl", "4", "--quiet",
                  "--artifact-dir", str(out), "--output-s3", f"s3://{BUCKET}/runs/ci",
                  "--s3-endpoint-url", moto.url)
    key = "runs/ci/sweep-run.tar.gz"
    assert f"uploaded to s3://{BUCKET}/{key}" in p.stdout, p.stdout
    local = (tmp_path / "sweep-run.tar.gz").read_bytes()
    assert read_back(moto, key) == local
    assert (out / "logs" / "kneepoint.log").is_file()


def test_a_large_folder_goes_up_in_parts(moto, tmp_path):
    out = tmp_path / "big-run"
    kneepoint("sweep", "--sim-profile", "fast", "--sim-time-scale", "1", "--concurrency", "2",
              "--request-count", "4", "--isl", "32", "--osl", "4", "--quiet",
              "--artifact-dir", str(out))
    # 12 MiB that gzip cannot shrink: three parts of 5 MiB.
    (out / "extra.bin").write_bytes(os.urandom(12 * 1024 * 1024))
    p = kneepoint("archive", str(out), "--output-s3", f"s3://{BUCKET}/parts",
                  "--s3-endpoint-url", moto.url, "--s3-part-size-mib", "5")
    key = "parts/big-run.tar.gz"
    assert f"uploaded to s3://{BUCKET}/{key}" in p.stdout, p.stdout
    local = (tmp_path / "big-run.tar.gz").read_bytes()
    assert len(local) > 10 * 1024 * 1024
    assert read_back(moto, key) == local
    parts = boto(moto, f"print(s3.head_object(Bucket={BUCKET!r}, Key={key!r}, "
                       "PartNumber=1).get('PartsCount'))").decode().strip()
    assert parts == "3", parts
