"""Finding and running the bundled `kneepoint` binary."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path
from typing import Iterable, Mapping, Optional, Sequence


class KneepointError(RuntimeError):
    """A kneepoint run that exited with an error; `stderr` holds what it printed."""

    def __init__(self, command: Sequence[str], returncode: int, stderr: str):
        self.command = list(command)
        self.returncode = returncode
        self.stderr = stderr
        tail = "\n".join(stderr.strip().splitlines()[-8:])
        super().__init__(f"kneepoint {command[1] if len(command) > 1 else ''} exited with "
                         f"{returncode}:\n{tail}")


def binary() -> str:
    """The path of the `kneepoint` executable: `$KNEEPOINT_BIN`, else the one this wheel
    installed beside the interpreter, else the first on the PATH."""
    env = os.environ.get("KNEEPOINT_BIN")
    if env:
        return env
    name = "kneepoint.exe" if os.name == "nt" else "kneepoint"
    for scripts in (sysconfig.get_path("scripts"), str(Path(sys.executable).parent)):
        candidate = Path(scripts) / name
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return str(candidate)
    found = shutil.which("kneepoint")
    if found:
        return found
    raise FileNotFoundError(
        "the kneepoint binary was not found: install the wheel (pip install kneepoint) "
        "or set KNEEPOINT_BIN"
    )


def flag_args(options: Mapping[str, object]) -> list[str]:
    """Keyword options as command-line flags: `request_count=512` → `--request-count 512`;
    `True` → the bare flag, `False`/`None` → nothing, a list → comma-separated values,
    a list under a `repeat_` name (e.g. `repeat_sla=[...]`) → the flag once per value."""
    out: list[str] = []
    for key, value in options.items():
        if value is None or value is False:
            continue
        repeat = key.startswith("repeat_")
        flag = "--" + (key[len("repeat_"):] if repeat else key).replace("_", "-")
        if value is True:
            out.append(flag)
        elif repeat:
            for v in value:  # type: ignore[union-attr]
                out += [flag, str(v)]
        elif isinstance(value, (list, tuple)):
            out += [flag, ",".join(str(v) for v in value)]
        else:
            out += [flag, str(value)]
    return out


def run_command(
    command: str,
    args: Iterable[str] = (),
    options: Optional[Mapping[str, object]] = None,
    echo: bool = False,
) -> subprocess.CompletedProcess:
    """Runs `kneepoint COMMAND ARGS... --flags...`; raises `KneepointError` on a non-zero
    exit other than `compare`'s regression verdict (1)."""
    argv = [binary(), command, *args, *flag_args(options or {})]
    proc = subprocess.run(
        argv,
        stdout=None if echo else subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    if proc.returncode != 0:
        raise KneepointError(argv, proc.returncode, proc.stderr or "")
    return proc
