"""Fetch wheels that pip could not download whole, in ranges, checked against PyPI's hashes.

A CI run failed after pip cut the same 200.9 MB CUDA wheel at the same byte (179.0 MB) through
8 runs of 21 resumes each (2026-12-06): a whole-file download kept dying at one place. This
asks for the file in 16 MB ranges, each retried on its own, checks the SHA-256 that PyPI's
simple index (JSON form, PEP 691) gives for that file name, and writes the wheel to a folder;
install.sh then installs it with --no-deps before asking pip again.

A call gives up after 10 minutes; the next resumes after the whole ranges written so far.

Usage: python fetch_wheel.py DEST_DIR PIP_LOG...
(the URLs are the `URL: https://...whl` lines of pip's incomplete-download errors in the logs;
the paths of the wheels fetched go to stdout, one per line, and everything else to stderr)
"""

import hashlib
import json
import os
import re
import ssl
import sys
import time
import urllib.request

CHUNK = 16 * 1024 * 1024
TRIES = 8
# One call gives up after this long (install.sh calls again, resuming from the ranges kept).
BUDGET_S = 600
DEADLINE = time.monotonic() + BUDGET_S


def context() -> ssl.SSLContext:
    cafile = os.environ.get("PIP_CERT") or os.environ.get("SSL_CERT_FILE")
    if cafile and os.path.exists(cafile):
        return ssl.create_default_context(cafile=cafile)
    return ssl.create_default_context()


def get(url: str, headers: dict, ctx: ssl.SSLContext) -> bytes:
    last = None
    for attempt in range(TRIES):
        if time.monotonic() > DEADLINE:
            raise RuntimeError(f"{url}: out of time ({BUDGET_S} s) after {attempt} attempts: {last}")
        try:
            req = urllib.request.Request(url, headers=headers)
            with urllib.request.urlopen(req, timeout=60, context=ctx) as resp:
                return resp.read()
        except OSError as err:  # URLError, timeouts and resets are all OSError
            last = err
            time.sleep(min(5 * (attempt + 1), 30))
    raise RuntimeError(f"{url}: {TRIES} attempts failed: {last}")


def expected(filename: str, ctx: ssl.SSLContext) -> tuple:
    project = re.sub(r"[-_.]+", "-", filename.split("-", 1)[0]).lower()
    index = os.environ.get("PIP_INDEX_URL", "https://pypi.org/simple").rstrip("/")
    body = get(f"{index}/{project}/", {"Accept": "application/vnd.pypi.simple.v1+json"}, ctx)
    for f in json.loads(body)["files"]:
        if f["filename"] == filename:
            return f["hashes"]["sha256"], f.get("size")
    raise RuntimeError(f"{filename}: not in {index}/{project}/")


def fetch(url: str, dest: str, ctx: ssl.SSLContext) -> None:
    filename = url.rsplit("/", 1)[1].split("#", 1)[0]
    out = os.path.join(dest, filename)
    sha, size = expected(filename, ctx)
    if os.path.exists(out) and hashlib.sha256(open(out, "rb").read()).hexdigest() == sha:
        print(f"{filename}: already fetched", file=sys.stderr)
        print(out)
        return
    if size is None:
        raise RuntimeError(f"{filename}: the index gives no size, so no ranges")
    digest = hashlib.sha256()
    tmp = out + ".part"
    # Whole ranges a cut-short earlier call wrote are kept, and the fetch goes on after them.
    done = 0
    if os.path.exists(tmp):
        done = os.path.getsize(tmp) // CHUNK * CHUNK
        with open(tmp, "rb") as fh:
            digest.update(fh.read(done))
        with open(tmp, "r+b") as fh:
            fh.truncate(done)
    with open(tmp, "ab") as fh:
        for start in range(done, size, CHUNK):
            end = min(start + CHUNK, size) - 1
            part = get(url, {"Range": f"bytes={start}-{end}"}, ctx)
            if len(part) != end - start + 1:
                raise RuntimeError(f"{filename}: range {start}-{end} gave {len(part)} bytes")
            digest.update(part)
            fh.write(part)
            fh.flush()
    if digest.hexdigest() != sha:
        os.remove(tmp)
        raise RuntimeError(f"{filename}: SHA-256 {digest.hexdigest()} is not PyPI's {sha}")
    os.replace(tmp, out)
    print(f"{filename}: fetched in ranges, {size} bytes, SHA-256 checked", file=sys.stderr)
    print(out)


def main(dest: str, logs: list) -> int:
    os.makedirs(dest, exist_ok=True)
    urls = set()
    for log in logs:
        text = open(log, errors="replace").read()
        urls.update(re.findall(r"URL: (https://\S+?\.whl)", text))
    ctx = context()
    failed = 0
    for url in sorted(urls):
        try:
            fetch(url, dest, ctx)
        except RuntimeError as err:
            print(err, file=sys.stderr)
            failed += 1
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2:]))
