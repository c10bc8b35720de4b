"""G1's pause-time predictions (``rocketsim.client.heap``'s adaptive young sizing): what G1 expects a young
collection to cost, learnt from the collections it ran, starting from conservative defaults; so a JVM
starts from its smallest young generation and grows it over tens of collections.

OpenJDK 17u: ``src/hotspot/share/gc/g1/g1Analytics.cpp`` (the defaults by ``ParallelGCThreads``:
``cost_per_byte_ms_defaults``, ``constant_other_time_ms_defaults``,
``young_other_cost_per_region_ms_defaults``, seeded in ``G1Analytics::G1Analytics``; the reports of
``G1Policy::record_collection_pause_end``), ``g1Predictions.hpp`` (``G1Predictions::predict``: the decaying
average plus ``G1ConfidencePercent`` / 100 standard deviations, a multiple of the average under five
samples), ``utilities/numberSeq.cpp`` (``AbsSeq::add``: the decaying average and variance) and
``g1SurvRateGroup.cpp`` (``reset``: the survival rate first predicted, 0.4).

More: docs/reference/modules.md (rocketsim/client/heap.py), docs/validation.md ("G1's start-up
predictions").
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

SIGMA = 0.5  # G1ConfidencePercent / 100: the standard deviations a prediction adds to the average
DECAY = 0.7  # DEFAULT_ALPHA_VALUE: the weight of the past in a decaying average
FEW_SAMPLES = 5  # under this many samples the deviation is at least the average x (5 - samples) / 2
US_PER_KIB_PER_MS_PER_BYTE = 1000.0 * 1024.0
# G1Analytics' seeds by min(ParallelGCThreads - 1, 7)
COPY_MS_PER_BYTE = (0.00006, 0.00003, 0.00003, 0.000015, 0.000015, 0.00001, 0.00001, 0.000009)
CONSTANT_OTHER_MS = 5.0
YOUNG_OTHER_MS_PER_REGION = (0.3, 0.2, 0.2, 0.15, 0.15, 0.12, 0.12, 0.1)
INITIAL_SURVIVAL = 0.4  # G1SurvRateGroup::reset


@dataclass
class DecayingSeq:
    """HotSpot's ``TruncatedSeq`` as G1 predicts from it: a decaying average and variance."""

    num: int = 0
    davg: float = 0.0
    dvariance: float = 0.0

    def add(self, value: float) -> None:
        """One sample (JDK 17 ``AbsSeq::add``: the first sets the average, the rest decay into it)."""
        if self.num == 0:
            self.davg, self.dvariance = value, 0.0
        else:
            self.davg = (1.0 - DECAY) * value + DECAY * self.davg
            diff = value - self.davg
            self.dvariance = (1.0 - DECAY) * diff * diff + DECAY * self.dvariance
        self.num += 1

    def predict(self) -> float:
        """``G1Predictions::predict_zero_bounded``: the average plus ``SIGMA`` deviations, the deviation
        at least the average x (5 - samples) / 2 under five samples (twice the average with one)."""
        deviation = math.sqrt(self.dvariance)
        if self.num < FEW_SAMPLES:
            deviation = max(self.davg * (FEW_SAMPLES - self.num) / 2.0, deviation)
        return max(self.davg + SIGMA * deviation, 0.0)


def seeded(value: float) -> DecayingSeq:
    seq = DecayingSeq()
    seq.add(value)
    return seq


@dataclass(frozen=True)
class PauseCosts:
    """What a young collection is predicted to cost (us) and copy (the share of eden that survives)."""

    fixed_us: float  # the constant part
    copy_us_per_kib: float
    per_region_us: float  # per eden region (G1's young "other" time)
    survival: float


@dataclass
class G1Analytics:
    """G1's predictions of a young collection's costs for ``workers`` stop-the-world threads: seeded with
    G1's defaults, each young collection reports what it cost."""

    workers: int
    copy: DecayingSeq = field(init=False)
    fixed: DecayingSeq = field(init=False)
    per_region: DecayingSeq = field(init=False)
    survival: DecayingSeq = field(init=False)

    def __post_init__(self) -> None:
        index = min(max(self.workers, 1) - 1, 7)
        self.copy = seeded(COPY_MS_PER_BYTE[index] * US_PER_KIB_PER_MS_PER_BYTE)
        self.fixed = seeded(CONSTANT_OTHER_MS * 1000.0)
        self.per_region = seeded(YOUNG_OTHER_MS_PER_REGION[index] * 1000.0)
        self.survival = seeded(INITIAL_SURVIVAL)

    def predicted(self) -> PauseCosts:
        """The costs the next sizing uses (the survival rate bounded to [0, 1],
        ``predict_in_unit_interval``)."""
        survival = min(self.survival.predict(), 1.0)
        return PauseCosts(self.fixed.predict(), self.copy.predict(), self.per_region.predict(), survival)

    def report(
        self, fixed_us: float, copy_us_per_kib: float | None, per_region_us: float, survival: float
    ) -> None:
        """A young collection's costs (``record_collection_pause_end``: the copy cost only when it copied)."""
        if copy_us_per_kib is not None:
            self.copy.add(copy_us_per_kib)
        self.fixed.add(fixed_us)
        self.per_region.add(per_region_us)
        self.survival.add(survival)
