"""kneepoint from Python: run a sweep, a max-concurrency-under-SLA search, a ranking of
candidate deployments or a plan with the bundled `kneepoint` binary, and get the results back
as Python objects (and pandas DataFrames when pandas is installed), read from the artifact
folder the run wrote.

    import kneepoint
    sweep = kneepoint.sweep(concurrency=[64, 256, 1024])    # the built-in simulator
    sweep.knee, sweep.levels_frame()
    best = kneepoint.search(ttft_sla_ms=500, tpot_sla_ms=50, concurrency_max=1024)
    best.answer, best.probes_frame()

Keywords are the command's flags with `_` for `-` (`request_count=512` is
`--request-count 512`; a list is comma-separated; `True` is a bare flag; `repeat_sla=[...]`
repeats `--sla`). `kneepoint.binary()` is the executable, for anything else.
"""

from __future__ import annotations

import datetime as _dt
import json
import tempfile
from pathlib import Path
from typing import Optional, Union

from ._artifacts import (
    LengthSweepResult,
    Level,
    RecommendResult,
    SearchResult,
    SweepResult,
    load_sweep,
)
from ._binary import KneepointError, binary, flag_args, run_command

__all__ = [
    "KneepointError",
    "LengthSweepResult",
    "Level",
    "RecommendResult",
    "SearchResult",
    "SweepResult",
    "binary",
    "flag_args",
    "plan",
    "recommend",
    "report",
    "search",
    "sweep",
    "version",
]

PathLike = Union[str, Path]


def _artifact_dir(kind: str, artifact_dir: Optional[PathLike]) -> Path:
    if artifact_dir is not None:
        return Path(artifact_dir)
    stamp = _dt.datetime.now(_dt.timezone.utc).strftime("%Y%m%dT%H%M%S%fZ")
    return Path("artifacts") / f"{kind}-{stamp}"


def version() -> str:
    """The bundled binary's version (`kneepoint --version`)."""
    return run_command("--version").stdout.strip().split()[-1]


def sweep(
    artifact_dir: Optional[PathLike] = None, *, echo: bool = False, **options: object
) -> Union[SweepResult, LengthSweepResult]:
    """Runs `kneepoint sweep` (the built-in simulator unless `url=` is given) and returns its
    results: a `LengthSweepResult` when lengths were swept (`isl=[16, 32]`), else a
    `SweepResult`. `echo=True` lets the table print to this process's standard output."""
    out = _artifact_dir("sweep", artifact_dir)
    options.setdefault("quiet", True)
    run_command("sweep", options={**options, "artifact_dir": str(out)}, echo=echo)
    return load_sweep(out)


def search(
    artifact_dir: Optional[PathLike] = None, *, echo: bool = False, **options: object
) -> SearchResult:
    """Runs `kneepoint search` (max concurrency under the SLAs given as `ttft_sla_ms`,
    `tpot_sla_ms`, `e2e_sla_ms`, `error_rate_sla` or `repeat_sla=["metric:stat:op:x"]`)."""
    out = _artifact_dir("search", artifact_dir)
    options.setdefault("quiet", True)
    run_command("search", options={**options, "artifact_dir": str(out)}, echo=echo)
    return SearchResult.load(out)


def recommend(
    config: PathLike,
    artifact_dir: Optional[PathLike] = None,
    *,
    echo: bool = False,
    **options: object,
) -> RecommendResult:
    """Runs `kneepoint recommend --config CONFIG` (candidates, SLAs, prices) and returns the
    ranking (`recommendations.json`)."""
    out = _artifact_dir("recommend", artifact_dir)
    options.setdefault("quiet", True)
    run_command(
        "recommend",
        options={**options, "config": str(config), "artifact_dir": str(out)},
        echo=echo,
    )
    return RecommendResult.load(out)


def plan(**options: object) -> object:
    """Runs `kneepoint plan` (which instances hold a model, the predicted knee and cost) and
    returns its table as parsed JSON."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "plan.json"
        run_command("plan", options={**options, "json": str(path)})
        return json.loads(path.read_text(encoding="utf-8"))


def report(artifact_dir: PathLike) -> None:
    """Re-renders a saved artifact folder's summaries, plots and report.html."""
    run_command("report", args=[str(artifact_dir)])
