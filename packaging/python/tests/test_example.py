"""The wheel as a notebook user meets it: installed into a fresh venv, with no Rust toolchain
on the PATH, the example runs a sweep and a search against the built-in simulator and its
results come back as Python objects and DataFrames."""

import os
import runpy
import shutil
import sys
from pathlib import Path

import pytest

import kneepoint

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "sweep_then_search.py"


def test_the_binary_is_the_wheels_and_no_toolchain_is_needed():
    assert shutil.which("cargo") is None, "the test must run without a Rust toolchain"
    exe = Path(kneepoint.binary()).resolve()
    assert str(exe).startswith(str(Path(sys.prefix).resolve())), exe
    assert kneepoint.version().count(".") == 2


def test_man_pages_and_completions_are_installed():
    share = Path(sys.prefix) / "share"
    assert (share / "man" / "man1" / "kneepoint.1").is_file()
    assert (share / "man" / "man1" / "kneepoint-sweep.1").is_file()
    bash = share / "bash-completion" / "completions" / "kneepoint"
    assert "sweep" in bash.read_text()


def test_the_notebook_example_sweeps_then_searches(tmp_path, monkeypatch):
    monkeypatch.setenv("KNEEPOINT_EXAMPLE_QUICK", "1")
    result = runpy.run_path(str(EXAMPLE))["main"](tmp_path)
    sweep, search = result["sweep"], result["search"]
    assert [r["concurrency"] for r in sweep.rows] == [8, 32, 128]
    for level in sweep.levels:
        assert level.aggregate["request_count"]["avg"] == 128
        assert level.metric("time_to_first_token", "p95") > 0
        assert sum(1 for _ in level.records()) == 128
    assert search.answer is None or 8 <= search.answer <= 128
    assert 1 <= len(search.probes) <= 4
    assert (tmp_path / "sweep" / "report.html").is_file()
    pandas = pytest.importorskip("pandas")
    frame = sweep.levels_frame()
    assert isinstance(frame, pandas.DataFrame) and len(frame) == 3
    assert set(["concurrency", "request_throughput", "ttft_p95_ms"]) <= set(frame.columns)
    records = sweep.levels[0].records_frame()
    assert len(records) == 128 and records["time_to_first_token_ms"].notna().all()
    assert len(search.probes_frame()) == len(search.probes)
    if result["plot"] is not None:
        assert result["plot"].stat().st_size > 1000


def test_a_failing_run_raises_with_the_binarys_message(tmp_path):
    with pytest.raises(kneepoint.KneepointError) as e:
        kneepoint.sweep(tmp_path / "x", concurrency=[0])
    assert e.value.returncode != 0
    assert "concurrency" in str(e.value)


def test_flags_from_keywords():
    assert kneepoint.flag_args(
        {"request_count": 512, "concurrency": [1, 2], "quiet": True, "url": None,
         "repeat_sla": ["a", "b"], "overwrite": False}
    ) == ["--request-count", "512", "--concurrency", "1,2", "--quiet",
          "--sla", "a", "--sla", "b"]


def test_python_m_runs_the_binary():
    import subprocess

    out = subprocess.run([sys.executable, "-m", "kneepoint", "--version"],
                         capture_output=True, text=True, check=True, env=dict(os.environ))
    assert out.stdout.startswith("kneepoint ")


def test_a_length_sweep_is_read_from_its_own_file(tmp_path):
    # Issue 46 item 13: sweep(isl=[16, 32]) writes length_sweep.json, not sweep_summary.json.
    r = kneepoint.sweep(tmp_path / "lengths", isl=[16, 32], osl=4, concurrency=2, request_count=8)
    assert isinstance(r, kneepoint.LengthSweepResult)
    assert [row["isl"] for row in r.rows] == [16, 32]
