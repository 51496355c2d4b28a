#!/usr/bin/env bash
# Installs the wheel from target/wheels into a fresh venv (with pytest, pandas and matplotlib
# from PyPI) and runs packaging/python/tests with no Rust toolchain on the PATH.
set -euo pipefail
cd "$(dirname "$0")/../.."
wheel=$(ls target/wheels/kneepoint-*.whl)
venv=target/wheel/venv-test
rm -rf "$venv"
python3 -m venv "$venv"
PIP_CACHE_DIR=${PIP_CACHE_DIR:-target/real-servers/pip-cache} "$venv/bin/pip" install -q \
  --disable-pip-version-check "$wheel" pytest pandas matplotlib
# Only the system's directories and the venv's: no cargo, no rustc, no target/ binaries.
env -i HOME="$HOME" PATH="$PWD/$venv/bin:/usr/bin:/bin" LANG=C.UTF-8 \
  "$venv/bin/python" -m pytest -q -p no:cacheprovider packaging/python/tests
