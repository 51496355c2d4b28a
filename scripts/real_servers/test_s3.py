"""Issue 19 against moto's S3 server on loopback, with its authentication on (botocore checks
every SigV4 signature, independently of the aws-sigv4 crate kneepoint signs with):
`kneepoint sweep --output-s3` uploads the artifact folder's archive (one PutObject),
`kneepoint archive --s3-part-size-mib 5` a larger folder as a multipart upload; both are read
back with boto3 and compared byte for byte; a wrong secret is refused with a clear error."""
import os
import subprocess

import pytest

from aws import ENV, boto, start_moto
from conftest import BIN, kneepoint

BUCKET = "kneepoint-ci"


@pytest.fixture(scope="module")
def moto(tmp_path_factory):
    server = start_moto("moto", ["s3:*"])
    boto(server, f"s3.create_bucket(Bucket={BUCKET!r})", server.key)
    yield server
    server.stop()


@pytest.fixture(autouse=True)
def aws_env(monkeypatch, moto):
    for k, v in ENV.items():
        monkeypatch.setenv(k, v)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", moto.key[0])
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", moto.key[1])
    for k in ("AWS_SESSION_TOKEN", "AWS_PROFILE"):
        monkeypatch.delenv(k, raising=False)


def read_back(server, key: str) -> bytes:
    return boto(server, f"sys.stdout.buffer.write(s3.get_object(Bucket={BUCKET!r}, "
                        f"Key={key!r})['Body'].read())", server.key)


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
                       "PartNumber=1).get('PartsCount'))", moto.key).decode().strip()
    assert parts == "3", parts


def test_a_wrong_secret_is_refused_with_a_clear_error(moto, tmp_path, monkeypatch):
    out = tmp_path / "refused"
    out.mkdir()
    (out / "x.txt").write_text("x")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "not-the-secret")
    p = subprocess.run([str(BIN), "archive", str(out), "--output-s3", f"s3://{BUCKET}/no",
                        "--s3-endpoint-url", moto.url], capture_output=True, text=True,
                       timeout=120)
    assert p.returncode == 1, p.stdout
    assert "PutObject" in p.stderr and "403 SignatureDoesNotMatch" in p.stderr, p.stderr
    assert "not-the-secret" not in p.stderr
