"""Trace-and-density PNG of one coefficient's MCMC draws (drawn by ``canvas.figure_png``).

No pyplot: every call builds its own ``Figure`` on a ``FigureCanvasAgg``, so plots can be drawn
in parallel threads of the server's pool without touching global state. matplotlib is imported by
the first plot, not when the app starts.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from service.plots.canvas import figure_png, text

if TYPE_CHECKING:
    from matplotlib.figure import Figure

FIGSIZE = (10.0, 4.0)
MAX_BINS = 80
MAX_TRACE_POINTS = 4000
"""Draws per chain beyond which the trace shows every k-th draw (the density keeps them all)."""


@dataclass(frozen=True)
class CoefficientTrace:
    """One coefficient's draws (chains × draws) and the summary numbers shown with them."""

    draws: np.ndarray
    name: str
    mean: float
    lower: float
    upper: float
    level: float
    rhat: float | None = None
    ess: float | None = None
    subtitle: str = ""


def _number(value: float | None, fmt: str) -> str:
    return "n/a" if value is None or not np.isfinite(value) else format(value, fmt)


def title(trace: CoefficientTrace) -> str:
    """The figure title: coefficient name, R-hat and bulk ESS."""
    rhat, ess = _number(trace.rhat, ".3f"), _number(trace.ess, ".0f")
    return f"{text(trace.name)}: R-hat {rhat}, bulk ESS {ess}"


def _draw_trace(fig: Figure, trace: CoefficientTrace) -> None:
    ax = fig.add_subplot(1, 2, 1)
    n_draws = trace.draws.shape[1]
    step = max(1, -(-n_draws // MAX_TRACE_POINTS))
    iterations = np.arange(0, n_draws, step)
    for c, chain in enumerate(trace.draws):
        ax.plot(iterations, chain[::step], linewidth=0.6, alpha=0.8, label=f"chain {c + 1}")
    ax.set_xlabel("draw (after burn-in and thinning)")
    ax.set_ylabel(text(trace.name))
    ax.set_title("trace")
    if trace.draws.shape[0] <= 8:
        ax.legend(loc="upper right", fontsize="small")


def _draw_density(fig: Figure, trace: CoefficientTrace) -> None:
    ax = fig.add_subplot(1, 2, 2)
    pooled = trace.draws.ravel()
    edges = np.histogram_bin_edges(pooled, bins="auto")
    bins = edges if len(edges) <= MAX_BINS + 1 else MAX_BINS
    ax.hist(pooled, bins=bins, density=True, color="0.7", edgecolor="0.5", linewidth=0.3)
    ax.axvline(trace.mean, color="C3", linewidth=1.5, label=f"mean {trace.mean:.4g}")
    ax.axvspan(
        trace.lower,
        trace.upper,
        color="C0",
        alpha=0.15,
        zorder=0,
        label=f"{trace.level * 100:.4g}% interval [{trace.lower:.4g}, {trace.upper:.4g}]",
    )
    for bound in (trace.lower, trace.upper):
        ax.axvline(bound, color="C0", linestyle="--", linewidth=1.0)
    ax.set_xlabel(text(trace.name))
    ax.set_ylabel("density")
    ax.set_title("pooled draws")
    ax.legend(loc="best", fontsize="small")


def trace_png(trace: CoefficientTrace) -> bytes:
    """Trace of every chain (left) and the pooled density with mean and interval (right), as PNG."""

    def draw(fig: Figure) -> None:
        _draw_trace(fig, trace)
        _draw_density(fig, trace)
        heading = title(trace)
        fig.suptitle(f"{heading}\n{text(trace.subtitle)}" if trace.subtitle else heading)

    return figure_png(draw, FIGSIZE)
