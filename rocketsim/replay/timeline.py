"""An incident's per-broker series -> rocketsim's fault timeline (calibration.md §4.2), on a 10 s grid.

More: docs/reference/modules.md, rocketsim/replay/timeline.py.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from rocketsim.replay import buckets
from rocketsim.replay.kinds import ERRORS, LATENCY, RESPONSE_CODES, UP
from rocketsim.replay.series import Series, SeriesError

WINDOW_S = 10.0
SLOWDOWN_ENTER, SLOWDOWN_LEAVE = 1.5, 1.2
ERROR_FACTOR, ERROR_FLOOR = 10.0, 1e-3
COLLAPSE = 0.05  # a request rate under 5 % of the baseline: the broker answers (almost) nothing
LOAD_ROSE = 1.2  # a request rate 20 % over the baseline: traffic moved to the broker
MIN_WINDOWS, MAX_GAP = 2, 1
SUCCESS_CODE = "success"
FLOW_CONTROL_CODES = ("system_busy",)  # what the closed-loop store answers under load by itself


@dataclass(frozen=True)
class Fault:
    """One entry of the fault timeline (``FaultConfig``'s keys; None: not given)."""

    broker: str
    kind: str
    start_s: float
    end_s: float
    factor: float | None = None
    error: str | None = None
    rate: float | None = None
    period_s: float | None = None
    down_s: float | None = None

    def items(self) -> list[tuple[str, object]]:
        """The TOML keys of the ``[[faults]]`` entry, in ``FaultConfig``'s order."""
        keys = ("broker", "kind", "start_s", "end_s", "factor", "period_s", "down_s", "error", "rate")
        return [(k, getattr(self, k)) for k in keys if getattr(self, k) is not None]

    def describe(self) -> str:
        what = ""
        if self.factor is not None:
            what = f"x{self.factor:.3g}"
        elif self.rate is not None:
            what = f"{self.error} {self.rate:.3g}"
        elif self.period_s is not None:
            what = f"period {self.period_s:g} s, down {self.down_s:g} s"
        return f"{self.broker} {self.kind} {self.start_s:g}-{self.end_s:g} s {what}".rstrip()


@dataclass(frozen=True)
class BrokerSignals:
    """One broker's signals per window (NaN: unknown)."""

    slowdown: np.ndarray
    errors: dict[str, np.ndarray]  # rocketsim error -> ratio
    requests: np.ndarray  # requests per second
    up: np.ndarray
    absent: np.ndarray  # no latency value inside the broker's data span


@dataclass(frozen=True)
class Replay:
    """The fault timeline of an incident, what was left out and why, and the signals it came from."""

    faults: tuple[Fault, ...]
    left_out: tuple[str, ...]
    notes: tuple[str, ...]
    t0_s: float
    windows: int
    resolution_s: float
    signals: dict[str, BrokerSignals] = field(default_factory=dict)


# ---- 1. normalise, 2. resample -----------------------------------------------------------------------


def map_brokers(
    series: Sequence[Series], brokers: Sequence[str], broker_map: Mapping[str, str]
) -> dict[str, str]:
    """Each series' broker identity -> a scenario broker; :class:`SeriesError` for one that maps to none."""
    out: dict[str, str] = {}
    for s in series:
        if s.broker in out:
            continue
        target = broker_map.get(s.broker) or (s.broker if s.broker in brokers else None)
        if target is None:
            inside = [b for b in brokers if b in s.broker]
            target = inside[0] if len(inside) == 1 else None
        if target is None or target not in brokers:
            raise SeriesError(
                f"{s.source}: broker {s.broker!r} is not a broker of the base scenario "
                f"({', '.join(brokers)}); map it with --broker-map '{s.broker}=<broker>'"
            )
        out[s.broker] = target
    return out


def _rates(s: Series) -> tuple[np.ndarray, np.ndarray]:
    """A counter's increases per second at each later sample (a drop is a reset: the value is the
    increase); a rate, level or ratio as it is."""
    if not s.counter or len(s.times_s) < 2:
        return s.times_s, s.values
    inc = np.diff(s.values)
    inc = np.where(inc < 0, s.values[1:], inc)
    return s.times_s[1:], inc / np.diff(s.times_s)


def step_s(times: np.ndarray) -> float:
    """A series' sampling step: the median gap between samples (one window for a single sample)."""
    return float(np.median(np.diff(times))) if len(times) > 1 else WINDOW_S


def resample(times: np.ndarray, values: np.ndarray, t0_s: float, windows: int) -> np.ndarray:
    """Values per 10 s window: the mean of the samples that stand for it (each the step before it)."""
    step = step_s(times)
    total, count = np.zeros(windows), np.zeros(windows)
    for t, v in zip(times, values, strict=True):
        if not math.isfinite(v):
            continue
        last = math.floor((t - t0_s) / WINDOW_S)
        first = max(math.floor((t - step - t0_s) / WINDOW_S) + 1, 0) if step > WINDOW_S else last
        for w in range(max(first, 0), min(last, windows - 1) + 1):
            total[w] += v
            count[w] += 1
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(count > 0, total / np.maximum(count, 1), np.nan)


def _combine(columns: list[np.ndarray], how: str) -> np.ndarray:
    stacked = np.vstack(columns)
    if how == "sum":
        return np.where(np.isnan(stacked).all(axis=0), np.nan, np.nansum(stacked, axis=0))
    known = ~np.isnan(stacked).all(axis=0)
    out = np.full(stacked.shape[1], np.nan)
    if known.any():
        part = stacked[:, known]
        out[known] = np.nanmin(part, axis=0) if how == "min" else np.nanmean(part, axis=0)
    return out


# ---- 3. baseline, 4. signals ---------------------------------------------------------------------------


def _baseline(values: np.ndarray, mask: np.ndarray) -> float:
    chosen = values[mask & np.isfinite(values)]
    return float(np.median(chosen)) if len(chosen) else math.nan


def _broker_signals(
    mine: list[Series], t0_s: float, windows: int, base: np.ndarray, error_code: str, unmodelled: set[str]
) -> BrokerSignals:
    """One broker's signals from its series (already mapped to it)."""

    def resampled(s: Series) -> np.ndarray:
        return resample(*_rates(s), t0_s, windows)

    nan = np.full(windows, np.nan)
    latency = [s for s in mine if s.kind == LATENCY]
    bucketed = [s for s in latency if s.le is not None]
    quantile = [resampled(s) for s in latency if s.le is None]
    served = nan  # requests answered, when the buckets count them
    if bucketed:
        by_le: dict[float, list[np.ndarray]] = {}
        for s in bucketed:
            by_le.setdefault(s.le, []).append(resampled(s))  # type: ignore[arg-type]
        edges = sorted(by_le)
        cumulative = np.vstack([_combine(by_le[e], "sum") for e in edges])
        slowdown = buckets.slowdowns(np.array(edges), cumulative, base)
        served = cumulative[-1]  # the widest bucket counts every answered request
        absent = ~(served > 0)
    elif quantile:
        level = _combine(quantile, "mean")
        slowdown = level / _baseline(level, base)
        absent = np.isnan(level)
    else:
        slowdown, absent = nan.copy(), np.zeros(windows, bool)
    if latency:  # only gaps after the broker's first value count (a series that stops: a broker gone)
        absent &= _after_first(~absent)
    errors, requests = _errors(mine, resampled, windows, error_code, unmodelled)
    if np.isnan(requests).all():  # no requests by code: the buckets' counts are the requests
        requests = served
    ups = [resampled(s) for s in mine if s.kind == UP]
    up = _combine(ups, "min") if ups else nan.copy()
    return BrokerSignals(slowdown, errors, requests, up, absent)


def _errors(mine, resampled, windows: int, error_code: str, unmodelled: set[str]):  # noqa: ANN001
    """Error ratios per rocketsim error and the request rate, from requests by response code (or from a
    ratio series of ``error_code``)."""
    nan = np.full(windows, np.nan)
    by_code: dict[str, list[np.ndarray]] = {}
    ratios: list[np.ndarray] = []
    for s in (s for s in mine if s.kind == ERRORS):
        if s.code is None:
            ratios.append(resampled(s))
        else:
            by_code.setdefault(s.code.lower(), []).append(resampled(s))
    errors: dict[str, np.ndarray] = {}
    if ratios:
        errors[error_code] = _combine(ratios, "mean")
    if not by_code:
        return errors, nan.copy()
    rates = {code: _combine(cols, "sum") for code, cols in by_code.items()}
    total = _combine(list(rates.values()), "sum")
    with np.errstate(invalid="ignore", divide="ignore"):
        for code, rate in rates.items():
            if code == SUCCESS_CODE:
                continue
            if code not in RESPONSE_CODES:
                if np.nansum(rate) > 0:
                    unmodelled.add(code)
                continue
            errors[RESPONSE_CODES[code]] = np.where(total > 0, rate / total, np.nan)
    return errors, total


# ---- 5. segment ------------------------------------------------------------------------------------------


def segments(
    active: np.ndarray, min_windows: int = MIN_WINDOWS, max_gap: int = MAX_GAP
) -> list[tuple[int, int]]:
    """Runs of active windows as ``[start, end)``: runs at most ``max_gap`` windows apart joined, then
    those shorter than ``min_windows`` dropped."""
    edges = np.diff(np.concatenate([[0], active.astype(np.int8), [0]]))
    runs = list(zip(np.flatnonzero(edges == 1).tolist(), np.flatnonzero(edges == -1).tolist(), strict=True))
    joined: list[tuple[int, int]] = []
    for start, end in runs:
        if joined and start - joined[-1][1] <= max_gap:
            joined[-1] = (joined[-1][0], end)
        else:
            joined.append((start, end))
    return [(s, e) for s, e in joined if e - s >= min_windows]


def hysteresis(signal: np.ndarray, enter: float, leave: float) -> np.ndarray:
    """Active from a value >= ``enter`` while values stay >= ``leave`` (NaN: inactive)."""
    out = np.zeros(len(signal), bool)
    on = False
    for t, v in enumerate(signal):
        on = bool(math.isfinite(v) and (v >= enter or (on and v >= leave)))
        out[t] = on
    return out


def _mask(spans: Sequence[tuple[int, int]], windows: int) -> np.ndarray:
    out = np.zeros(windows, bool)
    for s, e in spans:
        out[s:e] = True
    return out


def _median(values: np.ndarray) -> float:
    finite = values[np.isfinite(values)]
    return float(np.median(finite)) if len(finite) else math.nan


def _after_first(seen: np.ndarray) -> np.ndarray:
    """The windows from the first one ``seen`` on."""
    out = np.zeros(len(seen), bool)
    at = np.flatnonzero(seen)
    if len(at):
        out[at[0] :] = True
    return out


def _down_masks(sig: BrokerSignals, base: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(outage, hang) windows: ``up`` 0, or (almost) no answers: a hang when ``up`` says it runs."""
    up_known = np.isfinite(sig.up)
    r0 = _baseline(sig.requests, base)
    if math.isfinite(r0) and r0 > 0:
        with np.errstate(invalid="ignore"):
            quiet = _after_first(np.isfinite(sig.requests)) & ~(sig.requests >= COLLAPSE * r0)
    else:
        quiet = sig.absent.copy()
    running = up_known & (sig.up >= 0.5)
    outage = (up_known & (sig.up < 0.5)) | (quiet & ~running)
    return outage, quiet & running


def _flapping(broker: str, spans: list[tuple[int, int]]) -> Fault | None:
    """Three or more outages at a steady period (the gaps between their starts within 1.5x of each
    other): one flapping fault."""
    if len(spans) < 3:
        return None
    gaps = np.diff([s for s, _ in spans])
    if gaps.max() > 1.5 * gaps.min():
        return None
    period = float(np.median(gaps)) * WINDOW_S
    down = float(np.median([e - s for s, e in spans])) * WINDOW_S
    if down >= period:
        return None
    return Fault(
        broker, "flapping", spans[0][0] * WINDOW_S, spans[-1][1] * WINDOW_S, period_s=period, down_s=down
    )


def _down_faults(broker: str, sig: BrokerSignals, base: np.ndarray) -> tuple[list[Fault], np.ndarray]:
    """The broker's outage, hang (or flapping) faults and the windows they cover."""
    outage, hang = _down_masks(sig, base)
    windows = len(outage)
    out_spans, hang_spans = segments(outage), segments(hang & ~outage)
    flap = _flapping(broker, out_spans)
    faults = [flap] if flap else [Fault(broker, "outage", s * WINDOW_S, e * WINDOW_S) for s, e in out_spans]
    faults += [Fault(broker, "hang", s * WINDOW_S, e * WINDOW_S) for s, e in hang_spans]
    covered = _mask(out_spans + hang_spans, windows)
    if flap:
        covered[int(flap.start_s / WINDOW_S) : int(flap.end_s / WINDOW_S)] = True
    return faults, covered


def _error_faults(
    broker: str,
    sig: BrokerSignals,
    base: np.ndarray,
    taken: np.ndarray,
    closed_loop: bool,
    left_out: list[str],
) -> list[Fault]:
    """Error bursts per code, the largest excess first (faults of one broker must not overlap)."""
    faults = []
    excess = {code: np.nansum(ratio) for code, ratio in sig.errors.items()}
    for code in sorted(sig.errors, key=lambda c: -excess[c]):
        ratio = sig.errors[code]
        e0 = _baseline(ratio, base)
        e0 = 0.0 if not math.isfinite(e0) else e0
        with np.errstate(invalid="ignore"):
            active = (ratio > max(ERROR_FACTOR * e0, ERROR_FLOOR)) & ~taken
        for s, e in segments(active):
            level = _median(ratio[s:e])
            rate = min(max((level - e0) / (1.0 - e0), 0.0), 1.0) if e0 < 1 else 1.0
            fault = Fault(broker, "error_burst", s * WINDOW_S, e * WINDOW_S, error=code, rate=round(rate, 4))
            if closed_loop and code in FLOW_CONTROL_CODES:
                left_out.append(
                    f"{fault.describe()}: left to the model (closed-loop brokers answer {code} under load "
                    "by their own flow control)"
                )
                continue
            faults.append(fault)
            taken[s:e] = True
    return faults


def _slowdown_faults(
    broker: str,
    sig: BrokerSignals,
    base: np.ndarray,
    taken: np.ndarray,
    others_down: Mapping[str, np.ndarray],
    left_out: list[str],
) -> list[Fault]:
    """Slowdowns outside the windows other faults took; one whose traffic rose while another broker was
    down is load the model moves there itself."""
    active = hysteresis(sig.slowdown, SLOWDOWN_ENTER, SLOWDOWN_LEAVE)
    r0 = _baseline(sig.requests, base)
    faults = []
    for s, e in segments(active & ~taken):
        fault = Fault(
            broker,
            "slowdown",
            s * WINDOW_S,
            e * WINDOW_S,
            factor=round(max(_median(sig.slowdown[s:e]), 1.0), 3),
        )
        load = _median(sig.requests[s:e]) / r0 if math.isfinite(r0) and r0 > 0 else math.nan
        down = [b for b, mask in others_down.items() if b != broker and mask[s:e].any()]
        if down and math.isfinite(load) and load >= LOAD_ROSE:
            left_out.append(
                f"{fault.describe()}: left to the model (its request rate rose {load:.2f}x while "
                f"{', '.join(down)} was down: traffic the producers moved there)"
            )
            continue
        faults.append(fault)
    lost = segments(active & taken, min_windows=1)
    for s, e in lost:
        left_out.append(
            f"{broker} slowdown {s * WINDOW_S:g}-{e * WINDOW_S:g} s during another fault of the broker: "
            "left out (rocketsim's faults of one broker do not overlap)"
        )
    return faults


# ---- the whole ------------------------------------------------------------------------------------------


def replay(
    series: Sequence[Series],
    brokers: Sequence[str],
    *,
    broker_map: Mapping[str, str] | None = None,
    baseline_s: tuple[float, float] | None = None,
    error_code: str = "system_busy",
    closed_loop: bool = False,
) -> Replay:
    """The fault timeline of an incident's series (module docstring); ``brokers``: the base scenario's."""
    if not series:
        raise SeriesError("the incident: expected at least one series (--latency, --errors or --up)")
    mapping = map_brokers(series, brokers, broker_map or {})
    all_times = np.concatenate([s.times_s for s in series])
    t0 = float(all_times.min())
    windows = math.floor((float(all_times.max()) - t0) / WINDOW_S) + 1
    resolution = max([WINDOW_S, *(step_s(s.times_s) for s in series)])
    starts = np.arange(windows) * WINDOW_S
    base = (
        np.ones(windows, bool) if baseline_s is None else (starts >= baseline_s[0]) & (starts < baseline_s[1])
    )
    unmodelled: set[str] = set()
    signals = {
        b: _broker_signals(
            [s for s in series if mapping[s.broker] == b], t0, windows, base, error_code, unmodelled
        )
        for b in brokers
        if any(mapping[s.broker] == b for s in series)
    }
    faults: list[Fault] = []
    left_out: list[str] = []
    covered: dict[str, np.ndarray] = {}
    for b, sig in signals.items():
        down, covered[b] = _down_faults(b, sig, base)
        faults += down
    for b, sig in signals.items():
        taken = covered[b].copy()
        faults += _error_faults(b, sig, base, taken, closed_loop, left_out)
        faults += _slowdown_faults(b, sig, base, taken, covered, left_out)
    left_out += [
        f"response_code {c}: no fault of rocketsim's broker model makes it" for c in sorted(unmodelled)
    ]
    notes = _notes(series, signals, resolution)
    faults.sort(key=lambda f: (f.start_s, brokers.index(f.broker), f.kind))
    return Replay(tuple(faults), tuple(left_out), tuple(notes), t0, windows, resolution, signals)


def _notes(series: Sequence[Series], signals: Mapping[str, BrokerSignals], resolution: float) -> list[str]:
    notes = []
    if resolution > WINDOW_S:
        notes.append(
            f"the series are sampled every {resolution:g} s: fault edges are known to that, not to 10 s"
        )
    if not any(s.kind == UP for s in series):
        notes.append("no up series: a broker that stops answering is taken as down (outage), not hung")
    if not any(s.kind == LATENCY for s in series):
        notes.append("no latency series: no slowdown can be seen")
    return notes
