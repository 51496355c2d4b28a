"""Results read back from a run's artifact folder (the files kneepoint writes)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Union, Any, Dict, Iterator, List, Optional


def _json(path: Path) -> Any:
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def _frame(rows: List[Dict[str, Any]]):
    try:
        import pandas  # noqa: F401  (optional)
    except ImportError as e:  # pragma: no cover - depends on the environment
        raise ImportError("pandas is not installed: pip install 'kneepoint[pandas]'") from e
    import pandas as pd

    return pd.DataFrame(rows)


@dataclass
class Level:
    """One measured level: its folder and its AIPerf-style aggregate."""

    dir: Path
    concurrency: Optional[int]
    aggregate: Dict[str, Any] = field(repr=False)

    def metric(self, name: str, stat: str = "avg") -> Optional[float]:
        """A statistic of a metric, e.g. `metric("time_to_first_token", "p95")` (ms)."""
        block = self.aggregate.get(name)
        return None if not isinstance(block, dict) else block.get(stat)

    def records(self) -> Iterator[Dict[str, Any]]:
        """The per-request records (`profile_export.jsonl`), one dict per request."""
        path = self.dir / "profile_export.jsonl"
        if not path.is_file():
            zst = self.dir / "profile_export.jsonl.zst"
            raise FileNotFoundError(
                f"{path} not found" + (" (records are zstd-compressed)" if zst.is_file() else "")
            )
        with open(path, encoding="utf-8") as f:
            for line in f:
                if line.strip():
                    yield json.loads(line)

    def records_frame(self):
        """The records as a pandas DataFrame (needs pandas): one row per request with its
        start, TTFT, latency, token counts and error, ms."""
        rows = []
        for r in self.records():
            meta = r.get("metadata", {})
            metrics = r.get("metrics", {})
            value = lambda k: (metrics.get(k) or {}).get("value")  # noqa: E731
            rows.append(
                {
                    "request_start_ns": meta.get("request_start_ns"),
                    "time_to_first_token_ms": value("time_to_first_token"),
                    "request_latency_ms": value("request_latency"),
                    "input_sequence_length": value("input_sequence_length"),
                    "output_sequence_length": value("output_sequence_length"),
                    "error": (r.get("error") or {}).get("type") if r.get("error") else None,
                }
            )
        return _frame(rows)


def _levels(root: Path, pairs: List["tuple[str, Optional[int]]"]) -> List[Level]:
    out = []
    for d, conc in pairs:
        folder = root / d
        agg_path = folder / "profile_export_aiperf.json"
        out.append(Level(folder, conc, _json(agg_path) if agg_path.is_file() else {}))
    return out


@dataclass
class _Run:
    """A run's folder and its top-level JSON file (`FILE`), as a dict."""

    FILE = ""
    dir: Path
    doc: Dict[str, Any] = field(repr=False)

    @classmethod
    def load(cls, dir: Path):
        return cls(Path(dir), _json(Path(dir) / cls.FILE))

    def _block(self, key: str) -> Dict[str, Any]:
        return self.doc.get(key) or {}

    def _list(self, key: str) -> List[Dict[str, Any]]:
        return list(self.doc.get(key) or [])


class SweepResult(_Run):
    """A sweep's results: `summary` is `sweep_summary.json` as a dict."""

    FILE = "sweep_summary.json"

    @property
    def summary(self) -> Dict[str, Any]:
        return self.doc

    @property
    def knee(self) -> Optional[int]:
        """The knee's concurrency, or None when the sweep found none."""
        return self._block("knee").get("knee")

    @property
    def zone(self) -> Dict[str, Any]:
        """The operating zone (knee, SLA breaking point, safe maximum...)."""
        return self._block("zone")

    @property
    def rows(self) -> List[Dict[str, Any]]:
        """One dict per level: concurrency, req/s, tokens/s, TTFT and latency percentiles."""
        return self._list("levels")

    @property
    def levels(self) -> List[Level]:
        """Each level's folder and aggregate."""
        return _levels(self.dir, [(r.get("dir", ""), r.get("concurrency")) for r in self.rows])

    def levels_frame(self):
        """The per-level table as a pandas DataFrame (needs pandas)."""
        keep = [{k: v for k, v in r.items() if not isinstance(v, (dict, list))} for r in self.rows]
        return _frame(keep)


class LengthSweepResult(_Run):
    """A length sweep's results (`sweep(isl=[...])`): `length_sweep.json` as a dict."""

    FILE = "length_sweep.json"

    @property
    def rows(self) -> List[Dict[str, Any]]:
        """One dict per length: isl, osl, TTFT, latency and throughput."""
        return self._list("rows")

    @property
    def prefill(self) -> Dict[str, Any]:
        """The prefill rate fitted to TTFT against the input lengths (empty with one length)."""
        return self._block("prefill")

    def rows_frame(self):
        """The per-length table as a pandas DataFrame (needs pandas)."""
        keep = [{k: v for k, v in r.items() if not isinstance(v, (dict, list))} for r in self.rows]
        return _frame(keep)


def load_sweep(dir: Path) -> Union["SweepResult", LengthSweepResult]:
    """A sweep's folder: a length sweep's `length_sweep.json`, else `sweep_summary.json`."""
    if (Path(dir) / LengthSweepResult.FILE).exists():
        return LengthSweepResult.load(Path(dir))
    return SweepResult.load(Path(dir))


class SearchResult(_Run):
    """A max-concurrency-under-SLA search: `history` is `search_history.json` as a dict."""

    FILE = "search_history.json"

    @property
    def history(self) -> Dict[str, Any]:
        return self.doc

    @property
    def boundary(self) -> Dict[str, Any]:
        """The answer with its interval, stop reason and confidence."""
        return self._block("boundary")

    @property
    def answer(self) -> Optional[int]:
        """The highest concurrency found to meet every SLA (None: not even the lowest)."""
        return self.boundary.get("feasible_max")

    @property
    def probes(self) -> List[Dict[str, Any]]:
        """One dict per probe: concurrency, throughput and each SLA's check."""
        return self._list("probes")

    def probes_frame(self):
        """One row per probe (needs pandas): iteration, concurrency, throughput, and each SLA's
        measured value and verdict."""
        rows = []
        for p in self.probes:
            probe = p.get("probe") or {}
            row = {
                "iteration": probe.get("iteration"),
                "concurrency": probe.get("concurrency"),
                "throughput": p.get("throughput"),
            }
            for c in p.get("checks") or []:
                row[f"{c.get('sla')}_value"] = c.get("value")
                row[f"{c.get('sla')}_holds"] = c.get("holds")
            rows.append(row)
        return _frame(rows)


class RecommendResult(_Run):
    """A ranking of candidate deployments: `recommendations` is `recommendations.json`."""

    FILE = "recommendations.json"

    @property
    def recommendations(self) -> Dict[str, Any]:
        return self.doc
