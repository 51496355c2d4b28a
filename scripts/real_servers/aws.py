"""moto's server mode on loopback with its authentication on (botocore checks every SigV4
signature, independently of the aws-sigv4 crate kneepoint signs with), and boto3 calls into it
from moto's venv."""
import json
import os
import subprocess
import urllib.request
from pathlib import Path

import pytest

from conftest import WORK
from servers import Server, free_port

# moto answers its first requests without authentication: the three that create the user, its
# policy and its key; everything after is checked against that key.
SETUP_REQUESTS = 3
ENV = {"AWS_REGION": "us-east-1"}


def moto_python() -> Path:
    py = WORK / "venv-moto" / "bin" / "python"
    if not py.exists():
        if os.environ.get("REAL_SERVERS_OPTIONAL") == "1":
            pytest.skip(f"{py} is missing (run scripts/real_servers/install.sh s3)")
        raise RuntimeError(f"{py} is missing: run scripts/real_servers/install.sh s3 first")
    return py


def boto(server, code: str, key=("setup", "setup")) -> bytes:
    """Runs `code` with `s3`, `iam` and `sagemaker` (boto3 clients of the moto server, signing
    with `key`) in moto's venv; its stdout."""
    prelude = ("import boto3, json, sys\n"
               f"kw = dict(endpoint_url={server.url!r}, region_name='us-east-1',"
               f" aws_access_key_id={key[0]!r}, aws_secret_access_key={key[1]!r})\n"
               "s3 = boto3.client('s3', **kw)\niam = boto3.client('iam', **kw)\n"
               "sagemaker = boto3.client('sagemaker', **kw)\n")
    p = subprocess.run([str(moto_python()), "-c", prelude + code], capture_output=True,
                       timeout=120, env={**os.environ, **ENV})
    assert p.returncode == 0, p.stderr.decode()
    return p.stdout


def start_moto(name: str, actions: list[str]) -> Server:
    """moto on a free port, authentication on after the setup requests, with a user allowed
    `actions`; `.key` is its (access key id, secret)."""
    py = moto_python()
    port = free_port()
    server = Server(name, [str(py.parent / "moto_server"), "-H", "127.0.0.1", "-p", str(port)],
                    port, ENV, "/", start_timeout_s=120)
    # Authentication on from here (the readiness probes above must not count).
    req = urllib.request.Request(server.url + "/moto-api/reset-auth", method="POST",
                                 data=str(SETUP_REQUESTS).encode(),
                                 headers={"Content-Type": "text/plain"})
    with urllib.request.urlopen(req, timeout=10) as r:
        assert r.status == 200
    policy = {"Version": "2012-10-17",
              "Statement": [{"Effect": "Allow", "Action": actions, "Resource": "*"}]}
    out = boto(server, "iam.create_user(UserName='ci')\n"
                       f"iam.put_user_policy(UserName='ci', PolicyName='ci', PolicyDocument={json.dumps(policy)!r})\n"
                       "k = iam.create_access_key(UserName='ci')['AccessKey']\n"
                       "print(k['AccessKeyId'], k['SecretAccessKey'])")
    server.key = tuple(out.decode().split())
    return server
