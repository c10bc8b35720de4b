"""The time axis every chart of a run shares: the window-coverage rule, the fault windows, series styles.

More: docs/reference/modules.md, rocketsim/present/timeline.py.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import matplotlib
import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.patches import Patch

from rocketsim.scenario import Scenario

TIME_LABEL = "time since scenario start (s)"
MIN_COVERED = 0.25  # of a window's length: less, and the window is not drawn
# (fill, edge) per fault, in start order; none of them a tab10 broker color
FAULT_COLORS = (
    ("#f4a582", "#b2182b"),
    ("#92c5de", "#2166ac"),
    ("#c2a5cf", "#762a83"),
    ("#a6dba0", "#1b7837"),
)
FAULT_GID = "fault"  # the gid prefix of the fault artists :meth:`Timeline.mark` draws
STOP_GID, STOP_COLOR = "producers-stop", "0.35"
MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*", "<", ">")
MARKER_SPACING = 0.012  # of the axes' diagonal: markers of a long series are thinned to this


@dataclass(frozen=True)
class FaultSpan:
    """One fault of the timeline, in simulated milliseconds."""

    broker: str
    kind: str
    start_ms: int
    end_ms: int

    @property
    def label(self) -> str:
        return f"{self.kind} {self.broker}"

    @property
    def legend(self) -> str:
        """What a chart's legend calls it: kind, broker and span."""
        return f"fault: {self.label}, {self.start_ms / 1000:g}-{self.end_ms / 1000:g} s"


def fault_spans(sc: Scenario) -> list[FaultSpan]:
    """The scenario's fault timeline, in start order."""
    spans = [FaultSpan(f.broker, f.kind, f.start_ms, f.end_ms) for f in sc.faults]
    return sorted(spans, key=lambda s: (s.start_ms, s.broker))


# ---- the window-coverage rule -------------------------------------------------------------------


def covered_windows(df: pd.DataFrame, end_ms: int | None) -> pd.DataFrame:
    """``df``'s rows (with ``window_start_ms`` and ``window_ms``) of the windows the chart draws, with
    ``covered_ms`` (the part of the window inside the run, scenario time 0 to ``end_ms``) and ``x_s``
    (that part's centre, in seconds); windows covered less than :data:`MIN_COVERED` are left out.
    ``end_ms`` None: every window is whole."""
    start = df["window_start_ms"].astype(np.int64)
    whole = start + df["window_ms"].astype(np.int64)
    end = whole if end_ms is None else np.minimum(whole, int(end_ms))
    covered = (end - start).clip(lower=0)
    keep = (covered > 0) & (covered >= MIN_COVERED * df["window_ms"])
    return df[keep].assign(covered_ms=covered[keep], x_s=(start[keep] + end[keep]) / 2000.0)


def per_covered(values: pd.Series | np.ndarray, windows: pd.DataFrame) -> np.ndarray:
    """A per-window quantity (a count, a share of the window's time) over the covered part instead of
    the whole window: ``values * window_ms / covered_ms`` (``windows`` from :func:`covered_windows`)."""
    scale = windows["window_ms"].to_numpy(float) / windows["covered_ms"].to_numpy(float)
    return np.asarray(values, float) * scale


def per_second(counts: pd.Series | np.ndarray, windows: pd.DataFrame) -> np.ndarray:
    """Counts per second of the part of each window the run covers."""
    return np.asarray(counts, float) * 1000.0 / windows["covered_ms"].to_numpy(float)


def window_sums(df: pd.DataFrame, columns: Sequence[str], end_ms: int | None) -> pd.DataFrame:
    """``columns`` summed over every row of each window (all brokers, all producers), covered windows
    only (:func:`covered_windows`), in time order."""
    if df.empty:
        return covered_windows(pd.DataFrame(columns=["window_start_ms", "window_ms", *columns]), end_ms)
    sums = df.groupby("window_start_ms", as_index=False).agg(
        window_ms=("window_ms", "first"), **{c: (c, "sum") for c in columns}
    )
    return covered_windows(sums.sort_values("window_start_ms"), end_ms)


def window_label(df: pd.DataFrame) -> str:
    """``"10 s windows"`` (of the frame's first row), for titles."""
    return f"{int(df['window_ms'].iloc[0]) / 1000:g} s windows" if len(df) else "no windows"


# ---- what every time axis shows --------------------------------------------------------------------


def _fault_colors(i: int) -> tuple[str, str]:
    return FAULT_COLORS[i % len(FAULT_COLORS)]


def fault_handles(faults: Sequence[FaultSpan]) -> list[Patch]:
    """One legend entry per fault, drawn as :meth:`Timeline.mark` draws it."""
    return [
        Patch(
            facecolor=_fault_colors(i)[0], edgecolor=_fault_colors(i)[1], ls="--", alpha=0.8, label=f.legend
        )
        for i, f in enumerate(faults)
    ]


def producers_stop_ms(pw: pd.DataFrame) -> int | None:
    """Where the run's producers begin to stop: the start of the first window in which a producer began
    its last send (``producer_windows``); None without sends. Producers' arrivals end at different times
    (a Poisson clock each), so the total rate falls from there to the run's end: the workload ending."""
    sending = pw[pw["sends"] > 0]
    if sending.empty:
        return None
    return int(sending.groupby("producer")["window_start_ms"].max().min())


@dataclass(frozen=True)
class Timeline:
    """What every time axis of a run's charts shows besides its data: the scenario's ``faults``, the
    run's end ``end_ms`` (its last window's coverage; None: windows are whole) and ``stop_ms``, where its
    producers begin to stop (:func:`producers_stop_ms`; None: not marked)."""

    faults: tuple[FaultSpan, ...] = ()
    end_ms: int | None = None
    stop_ms: int | None = None

    def windows(self, df: pd.DataFrame) -> pd.DataFrame:
        """The windows the chart draws (:func:`covered_windows`)."""
        return covered_windows(df, self.end_ms)

    def sums(self, df: pd.DataFrame, columns: Sequence[str]) -> pd.DataFrame:
        """``columns`` summed per window (:func:`window_sums`)."""
        return window_sums(df, columns, self.end_ms)

    def _stopping(self) -> bool:
        return self.stop_ms is not None and self.end_ms is not None and self.stop_ms < self.end_ms

    def mark(self, ax: Axes) -> None:
        """Draw each fault window (a light band behind the data, dashed edges over it: seen over a filled
        area or a heat map too; every artist's gid ``fault:<legend>``) and where producers stop (a hatched
        band to the run's end, a dotted line at its start)."""
        for i, f in enumerate(self.faults):
            fill, edge = _fault_colors(i)
            start, end = f.start_ms / 1000, f.end_ms / 1000
            gid = f"{FAULT_GID}:{f.legend}"
            ax.axvspan(start, end, facecolor=fill, alpha=0.3, lw=0, zorder=0.5).set_gid(gid)
            for x in (start, end):
                ax.axvline(x, color=edge, ls="--", lw=1.0, zorder=4).set_gid(gid)
        if self._stopping():
            start, end = self.stop_ms / 1000, self.end_ms / 1000
            band = ax.axvspan(
                start, end, facecolor="none", edgecolor=STOP_COLOR, hatch="///", lw=0, alpha=0.35, zorder=0.5
            )
            band.set_gid(STOP_GID)
            ax.axvline(start, color=STOP_COLOR, ls=":", lw=1.2, zorder=4).set_gid(STOP_GID)

    def handles(self) -> list:
        """The legend entries of :meth:`mark`."""
        handles = fault_handles(self.faults)
        if self._stopping():
            span = f"{self.stop_ms / 1000:.0f}-{self.end_ms / 1000:.0f} s"
            label = f"windows in which producers stop sending, {span} (the workload ends)"
            handles.append(Patch(facecolor="none", edgecolor=STOP_COLOR, hatch="///", ls=":", label=label))
        return handles

    def legend(self, fig: Figure, also: Sequence[Patch] = ()) -> None:
        """The figure's legend of what :meth:`mark` draws (:func:`legend`)."""
        legend(fig, [self], also)


NO_TIMELINE = Timeline()  # no faults, whole windows


def legend(fig: Figure, timelines: Iterable[Timeline], also: Sequence[Patch] = ()) -> None:
    """The figure's legend (below the charts) of what the ``timelines`` mark (the variants of a
    comparison: each entry once), with ``also`` (other figure-wide entries) after it, if there is any."""
    handles: dict[str, Patch] = {}
    for t in timelines:
        for handle in t.handles():
            handles.setdefault(handle.get_label(), handle)
    entries = [*handles.values(), *also]
    if entries:
        fig.legend(
            handles=entries, loc="outside lower left", ncols=min(len(entries), 3), fontsize=8, frameon=False
        )


# ---- series that may coincide -------------------------------------------------------------------


def series_styles(n: int) -> list[dict]:
    """Line styles for ``n`` series drawn in order: a hollow marker each (placed at most every
    :data:`MARKER_SPACING` of the axes), and lines and markers that narrow from the first to the last, so
    where series coincide the later ones sit inside the earlier ones and every one stays visible."""
    span = max(n - 1, 1)
    return [
        {
            "marker": MARKERS[i % len(MARKERS)],
            "lw": 2.4 - 1.4 * i / span,
            "ms": 6.5 - 3.0 * i / span,
            "mfc": "none",
            "mew": 1.0,
            "markevery": MARKER_SPACING,
            "clip_on": False,  # a series at 0 is drawn whole over the axis' floor
            "zorder": 2 + i / (n + 1),
        }
        for i in range(n)
    ]


def broker_styles(brokers: Sequence[str]) -> dict[str, dict]:
    """A fixed color, marker and width per broker (sorted names), the same in every chart."""
    cmap = matplotlib.colormaps["tab10"]
    names = sorted(brokers)
    return {
        b: {"color": cmap(i % 10), **style}
        for i, (b, style) in enumerate(zip(names, series_styles(len(names)), strict=True))
    }


def zero_floor(*axes: Axes) -> None:
    """Counts, rates and depths are never negative: the y axis (shared by ``axes``, e.g. a row of
    :func:`~rocketsim.present.plots.variant_timelines`) starts at 0, and shows 0..1 when the data never
    leaves 0 (an empty or all-zero panel). Call it once the data is drawn."""
    top = 0.0
    for ax in axes:
        data = [np.asarray(line.get_ydata(), float) for line in ax.get_lines() if line.get_gid() is None]
        data += [np.array([p.get_y() + p.get_height()]) for p in ax.patches if p.get_gid() is None]
        top = max([top, *(float(np.nanmax(d)) for d in data if np.isfinite(d).any())])
    for ax in axes:
        ax.set_ylim(0, None if top > 0 else 1)


def empty_note(ax: Axes, text: str) -> None:
    """Say in the panel why it holds nothing (a panel with no data keeps a 0..1 y axis)."""
    ax.text(0.5, 0.5, text, ha="center", va="center", transform=ax.transAxes, color="0.4")
