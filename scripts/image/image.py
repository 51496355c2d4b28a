#!/usr/bin/env python3
"""kneepoint's container image without a registry, a daemon or a container builder.

`build` assembles the image's root file system from a built `kneepoint` binary, the shared
libraries it links (glibc, libgcc: read from `ldd`), the host's CA certificates, a non-root
user (65532) and the man pages and shell completions the binary generates, and writes it as
an OCI image archive (`oci-layout`, `index.json`, blobs named by SHA-256) tagged
`kneepoint:latest`: `podman load -i`, `docker load -i` (Docker 25+) and `skopeo copy
oci-archive:...` read it.

`run` plays the part of a container runtime for a smoke test where none can start (this
project's CI sandbox refuses the OCI runtimes' setrlimit): it reads the archive back
(checking every blob's digest), unpacks its layers into a root file system, and starts the
image's entry point with the image's environment, chrooted into that file system, as the
image's user in a user namespace (`unshare --map-user --map-group --root --wd`).

    scripts/image/image.py build --binary target/release/kneepoint --out target/image
    scripts/image/image.py run target/image/kneepoint-oci.tar --rootfs target/image/rootfs \
        -- sweep --sim-profile fast --artifact-dir /home/kneepoint/out
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import io
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

USER = (65532, 65532)
HOME = "/home/kneepoint"
TAG = "kneepoint:latest"
ENV = [
    "PATH=/usr/local/bin:/usr/bin:/bin",
    f"HOME={HOME}",
    "SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt",
    "LANG=C.UTF-8",
]
ENTRYPOINT = ["/usr/local/bin/kneepoint"]
EPOCH = 0  # file times in the layer: fixed, so that the same inputs give the same digest


def shared_libraries(binary: Path) -> list[Path]:
    """The absolute paths `ldd` resolves for the binary, the dynamic loader included."""
    out = subprocess.run(["ldd", str(binary)], capture_output=True, text=True, check=True)
    libs = []
    for line in out.stdout.splitlines():
        m = re.search(r"(/\S+) \(0x", line)
        if m:
            libs.append(Path(m.group(1)))
    return libs


class Layer:
    """A layer tar built in memory with fixed owners and times."""

    def __init__(self) -> None:
        self.buf = io.BytesIO()
        self.tar = tarfile.open(fileobj=self.buf, mode="w", format=tarfile.PAX_FORMAT)
        self.dirs: set[str] = set()

    def _info(self, name: str, kind: bytes, mode: int, owner=(0, 0)) -> tarfile.TarInfo:
        info = tarfile.TarInfo(name.lstrip("/"))
        info.type, info.mode, info.mtime = kind, mode, EPOCH
        info.uid, info.gid = owner
        info.uname = info.gname = ""
        return info

    def dir(self, path: str, mode: int = 0o755, owner=(0, 0)) -> None:
        parts = Path(path).parts[1:]
        for i in range(1, len(parts) + 1):
            p = "/" + "/".join(parts[:i])
            if p not in self.dirs:
                last = i == len(parts)
                self.tar.addfile(self._info(p, tarfile.DIRTYPE, mode if last else 0o755,
                                            owner if last else (0, 0)))
                self.dirs.add(p)

    def file(self, path: str, data: bytes, mode: int = 0o644) -> None:
        self.dir(str(Path(path).parent))
        info = self._info(path, tarfile.REGTYPE, mode)
        info.size = len(data)
        self.tar.addfile(info, io.BytesIO(data))

    def bytes(self) -> bytes:
        self.tar.close()
        return self.buf.getvalue()


def blob(out: Path, data: bytes) -> dict:
    digest = hashlib.sha256(data).hexdigest()
    (out / "blobs" / "sha256").mkdir(parents=True, exist_ok=True)
    (out / "blobs" / "sha256" / digest).write_bytes(data)
    return {"digest": f"sha256:{digest}", "size": len(data)}


def build(args: argparse.Namespace) -> None:
    binary = Path(args.binary)
    out = Path(args.out)
    shutil.rmtree(out / "oci", ignore_errors=True)
    layer = Layer()
    layer.file("/usr/local/bin/kneepoint", binary.read_bytes(), 0o755)
    for lib in shared_libraries(binary):
        layer.file(str(lib), lib.resolve().read_bytes(), 0o755)
    layer.file("/etc/ssl/certs/ca-certificates.crt", Path(args.ca_bundle).read_bytes())
    uid, gid = USER
    layer.file("/etc/passwd", f"root:x:0:0:root:/root:/sbin/nologin\n"
                              f"kneepoint:x:{uid}:{gid}:kneepoint:{HOME}:/sbin/nologin\n".encode())
    layer.file("/etc/group", f"root:x:0:\nkneepoint:x:{gid}:\n".encode())
    layer.dir("/tmp", 0o1777)
    layer.dir(HOME, 0o755, USER)
    with tempfile.TemporaryDirectory() as tmp:
        share = Path(tmp)
        man = share / "man" / "man1"
        man.mkdir(parents=True)
        subprocess.run([str(binary), "man", "--dir", str(man)], check=True,
                       stdout=subprocess.DEVNULL)
        for page in sorted(man.iterdir()):
            layer.file(f"/usr/local/share/man/man1/{page.name}", page.read_bytes())
        for shell, dest in [
            ("bash", "bash-completion/completions/kneepoint"),
            ("zsh", "zsh/site-functions/_kneepoint"),
            ("fish", "fish/vendor_completions.d/kneepoint.fish"),
        ]:
            script = subprocess.run([str(binary), "completions", shell], check=True,
                                    capture_output=True).stdout
            layer.file(f"/usr/local/share/{dest}", script)
    raw = layer.bytes()
    oci = out / "oci"
    layer_desc = blob(oci, gzip.compress(raw, mtime=0))
    layer_desc["mediaType"] = "application/vnd.oci.image.layer.v1.tar+gzip"
    version = subprocess.run([str(binary), "--version"], capture_output=True, text=True,
                             check=True).stdout.split()[-1]
    config = {
        "architecture": {"x86_64": "amd64", "aarch64": "arm64"}.get(os.uname().machine,
                                                                   os.uname().machine),
        "os": "linux",
        "config": {
            "User": f"{uid}:{gid}",
            "Env": ENV,
            "Entrypoint": ENTRYPOINT,
            "Cmd": ["--help"],
            "WorkingDir": HOME,
            "Labels": {"org.opencontainers.image.title": "kneepoint",
                       "org.opencontainers.image.version": version},
        },
        "rootfs": {"type": "layers",
                   "diff_ids": [f"sha256:{hashlib.sha256(raw).hexdigest()}"]},
        "history": [{"created_by": "scripts/image/image.py build"}],
    }
    config_desc = blob(oci, json.dumps(config, sort_keys=True).encode())
    config_desc["mediaType"] = "application/vnd.oci.image.config.v1+json"
    manifest = {"schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
                "config": config_desc, "layers": [layer_desc]}
    manifest_desc = blob(oci, json.dumps(manifest, sort_keys=True).encode())
    manifest_desc["mediaType"] = "application/vnd.oci.image.manifest.v1+json"
    name, tag = TAG.split(":")
    manifest_desc["annotations"] = {"org.opencontainers.image.ref.name": tag,
                                    "io.containerd.image.name": f"docker.io/library/{TAG}"}
    (oci / "oci-layout").write_text(json.dumps({"imageLayoutVersion": "1.0.0"}))
    (oci / "index.json").write_text(json.dumps(
        {"schemaVersion": 2, "mediaType": "application/vnd.oci.image.index.v1+json",
         "manifests": [manifest_desc]}, sort_keys=True))
    archive = out / "kneepoint-oci.tar"
    with tarfile.open(archive, "w") as t:
        for p in sorted(oci.rglob("*")):
            info = t.gettarinfo(str(p), str(p.relative_to(oci)))
            info.mtime, info.uid, info.gid, info.uname, info.gname = EPOCH, 0, 0, "", ""
            if p.is_file():
                with open(p, "rb") as f:
                    t.addfile(info, f)
            else:
                t.addfile(info)
    print(f"{archive}: {TAG}, {len(raw) / 1e6:.1f} MB uncompressed, "
          f"{layer_desc['size'] / 1e6:.1f} MB compressed layer")


def read_blob(t: tarfile.TarFile, desc: dict) -> bytes:
    algo, digest = desc["digest"].split(":")
    data = t.extractfile(f"blobs/{algo}/{digest}").read()  # type: ignore[union-attr]
    if hashlib.sha256(data).hexdigest() != digest or len(data) != desc["size"]:
        sys.exit(f"blob {desc['digest']} does not match its digest or size")
    return data


def run(args: argparse.Namespace) -> int:
    with tarfile.open(args.archive) as t:
        layout = json.loads(t.extractfile("oci-layout").read())  # type: ignore[union-attr]
        assert layout["imageLayoutVersion"] == "1.0.0", layout
        index = json.loads(t.extractfile("index.json").read())  # type: ignore[union-attr]
        manifest = json.loads(read_blob(t, index["manifests"][0]))
        config = json.loads(read_blob(t, manifest["config"]))["config"]
        rootfs = Path(args.rootfs)
        shutil.rmtree(rootfs, ignore_errors=True)
        rootfs.mkdir(parents=True)
        for desc in manifest["layers"]:
            data = read_blob(t, desc)
            if desc["mediaType"].endswith("+gzip"):
                data = gzip.decompress(data)
            with tarfile.open(fileobj=io.BytesIO(data)) as layer:
                # Python 3.12+ (and 3.11.4+) ask for an extraction filter; the layer is ours.
                safe = {"filter": "fully_trusted"} if hasattr(tarfile, "data_filter") else {}
                layer.extractall(rootfs, numeric_owner=True, **safe)
                # The image's user is mapped onto the caller (below): what it owns in the
                # image, the caller owns here, as a rootless runtime shifts owners.
                uid, gid = (int(x) for x in config["User"].split(":"))
                for m in layer.getmembers():
                    if m.uid == uid or m.gid == gid:
                        os.lchown(rootfs / m.name, os.getuid(), os.getgid())
    uid, gid = config["User"].split(":")
    env = dict(e.split("=", 1) for e in config["Env"])
    # util-linux's unshare makes the user namespace, maps the image's user onto the caller,
    # changes root and working directory while it still holds the namespace's capabilities,
    # then starts the entry point as that user (its capabilities gone at exec).
    tool = shutil.which("unshare") or shutil.which("unshare", path="/usr/sbin:/sbin")
    if tool is None:
        sys.exit("running the image needs util-linux's unshare")
    argv = [tool, f"--map-user={uid}", f"--map-group={gid}", f"--root={rootfs}",
            f"--wd={config.get('WorkingDir') or '/'}", *config["Entrypoint"], *args.command]
    return subprocess.run(argv, env=env).returncode


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="what", required=True)
    b = sub.add_parser("build", help="write the OCI image archive")
    b.add_argument("--binary", required=True)
    b.add_argument("--out", default="target/image")
    b.add_argument("--ca-bundle", default="/etc/ssl/certs/ca-certificates.crt")
    r = sub.add_parser("run", help="run the image's entry point from its archive")
    r.add_argument("archive")
    r.add_argument("--rootfs", default="target/image/rootfs")
    argv = sys.argv[1:]
    cut = argv.index("--") if "--" in argv else len(argv)
    args = p.parse_args(argv[:cut])
    args.command = argv[cut + 1:]
    if args.what == "build":
        build(args)
        return 0
    return run(args)


if __name__ == "__main__":
    sys.exit(main())
