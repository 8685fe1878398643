"""``bench_distributed``'s table and the issue's goals next to it (printed, never asserted)."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

GOAL_LINEAR_10M_S = 40.0
GOAL_RATIO = 3.0
GOAL_BATCH_ROWS_S = 500_000.0


def load_average() -> str:
    """The 1-minute load average, as ``uptime`` prints it."""
    return f"{os.getloadavg()[0]:.2f}"


@dataclass
class Row:
    """One line of the table."""

    rows: int
    source: str
    what: str
    seconds: float | None = None
    reference_s: float | None = None
    rss: dict[str, Any] = field(default_factory=dict)
    reference_rss: float | None = None
    note: str = ""
    load: str = field(default_factory=load_average)
    data: dict[str, Any] = field(default_factory=dict)

    @property
    def ratio(self) -> float | None:
        if self.seconds is None or not self.reference_s:
            return None
        return self.seconds / self.reference_s


def _mb(value: float | None) -> str:
    return "–" if value is None else f"{value:,.0f}"


def _s(value: float | None) -> str:
    return "–" if value is None else f"{value:.2f}"


def markdown(rows: list[Row]) -> str:
    """The table: each time with its reference, their ratio and the peak RSS of every process."""
    head = (
        "| rows | source | what | time (s) | per 1M rows (s) | reference (s) | ratio | "
        "server / driver / workers peak RSS (MB) | reference peak RSS (MB) | load | note |"
        # driver "–": the job starts no fit process (batch scoring runs as one task per file)
    )
    lines = [head, "|" + "---|" * 11]
    for r in rows:
        rss = r.rss
        procs = (
            f"{_mb(rss.get('server'))} / {_mb(rss.get('driver') or None)} / "
            + " + ".join(_mb(w) for w in rss.get("workers", []))
            if rss
            else "–"
        )
        per = None if r.seconds is None else r.seconds / (r.rows / 1e6)
        ratio = "–" if r.ratio is None else f"{r.ratio:.2f}x"
        lines.append(
            f"| {r.rows:,} | {r.source} | {r.what} | {_s(r.seconds)} | {_s(per)} | "
            f"{_s(r.reference_s)} | {ratio} | {procs} | {_mb(r.reference_rss)} | {r.load} | "
            f"{r.note} |"
        )
    return "\n".join(lines)


def goals(rows: list[Row]) -> list[str]:
    """The issue's goals, each with the figures that judge it (printed, never asserted)."""
    out = []
    trained = [r for r in rows if r.what.endswith("by reference") and r.seconds]
    for key in sorted({(r.source, r.what) for r in trained}):
        series = sorted((r.rows, r.seconds) for r in trained if (r.source, r.what) == key)
        if len(series) > 1:
            (n0, t0), (n1, t1) = series[0], series[-1]
            growth = (t1 / t0) / (n1 / n0)
            out.append(
                f"- linear in rows, {key[1]} ({key[0]}): {n0:,} → {n1:,} rows × {n1 / n0:.0f}, "
                f"time × {t1 / t0:.2f} (time per row × {growth:.2f}; 1.00 is linear)"
            )
    for r in trained:
        if r.what == "linear_svm by reference" and r.rows >= 10_000_000:
            verdict = "met" if r.seconds <= GOAL_LINEAR_10M_S else "NOT met"
            out.append(
                f"- 10M × 20 linear_svm by reference ({r.source}) ≤ {GOAL_LINEAR_10M_S:.0f} s: "
                f"{r.seconds:.1f} s ({verdict if r.source == 'local' else 'reported'})"
            )
    for r in trained:
        if r.ratio is not None:
            verdict = "met" if r.ratio <= GOAL_RATIO else "NOT met"
            out.append(
                f"- by reference ≤ {GOAL_RATIO:g}× in memory, {r.what} {r.rows:,} "
                f"({r.source}): {r.ratio:.2f}× ({verdict})"
            )
    for r in rows:
        if r.what.startswith("batch") and r.seconds and r.rows >= 10_000_000:
            speed = r.data["rows_per_s"]
            verdict = "met" if speed >= GOAL_BATCH_ROWS_S else "NOT met"
            out.append(
                f"- batch scoring of 10M rows ({r.source}) ≥ {GOAL_BATCH_ROWS_S:,.0f} rows/s: "
                f"{speed:,.0f} rows/s ({verdict if r.source == 'local' else 'reported'})"
            )
    return out


def report(rows: list[Row]) -> str:
    """The table, then the goals."""
    return markdown(rows) + "\n\nGoals (issue 25):\n" + "\n".join(goals(rows)) + "\n"
