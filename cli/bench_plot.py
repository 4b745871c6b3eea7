"""`samsa bench --plot`'s PNG: panels of line charts stacked over one time axis, drawn by matplotlib
(the optional `plot` extra: `pip install -e '.[plot]'`).

matplotlib is imported only when a plot is drawn, so the other commands, and bench without
--plot, run without it; `require_matplotlib()` lets a command refuse --plot before its work starts.
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from typing import TYPE_CHECKING, NamedTuple

from . import BAD_USAGE, CommandError

if TYPE_CHECKING:
    from matplotlib.figure import Figure

# matplotlib's default cycle (tab10), by name.
BLUE, ORANGE, RED = "tab:blue", "tab:orange", "tab:red"
INSTALL_HINT = "--plot draws with matplotlib, which is not installed: pip install -e '.[plot]' (or pip install matplotlib)"
DPI = 100


class Series(NamedTuple):
    name: str
    color: str
    points: Sequence[tuple[float, float]]


class Panel(NamedTuple):
    title: str
    series: Sequence[Series]


def require_matplotlib() -> None:
    """CommandError (exit 2) with the one line that says how to install matplotlib, when it is not."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        raise CommandError(INSTALL_HINT, BAD_USAGE) from None


def figure(panels: Sequence[Panel], x_label: str, width: int = 800, panel_height: int = 260) -> Figure:
    """The panels stacked, sharing the x axis (0 to the largest x), each with its title, its
    series' legend and a y axis from 0; width x (panel_height per panel + 30) pixels."""
    from matplotlib.figure import Figure  # a Figure of its own: no pyplot, no global backend state

    fig = Figure(figsize=(width / DPI, (panel_height * len(panels) + 30) / DPI), dpi=DPI, layout="constrained")
    axes = fig.subplots(len(panels), 1, sharex=True, squeeze=False)[:, 0]
    x_max = max((x for panel in panels for series in panel.series for x, _ in series.points), default=0.0)
    for ax, panel in zip(axes, panels):
        ax.set_title(panel.title, loc="left", fontsize="medium")
        for series in panel.series:
            xs, ys = zip(*series.points) if series.points else ((), ())
            ax.plot(xs, ys, color=series.color, label=series.name, linewidth=1.5,
                    marker="o" if len(series.points) == 1 else None)
        ax.set_ylim(bottom=0)
        ax.grid(True, color="0.9")
        if any(series.points for series in panel.series):
            ax.legend(loc="upper right", fontsize="small", frameon=False, ncols=len(panel.series))
    axes[-1].set_xlim(0, x_max or 1.0)
    axes[-1].set_xlabel(x_label)
    return fig


def png(fig: Figure) -> bytes:
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=DPI)
    return buffer.getvalue()


def plot(panels: Sequence[Panel], x_label: str, width: int = 800, panel_height: int = 260) -> bytes:
    """figure(...) as a PNG file's bytes."""
    return png(figure(panels, x_label, width, panel_height))
