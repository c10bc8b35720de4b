"""The host's stalls' lengths (``producers.host_stall_ms`` and ``host_stall_shape``): one definition for the
engine's draw (:class:`rocketsim.client.host.HostStalls`) and the calibration's fit
(:mod:`rocketsim.calibration.stalls`).

More: docs/reference/modules.md, rocketsim/client/stall_lengths.py.
"""

from __future__ import annotations

import math

import numpy as np
from scipy.special import gammaincinv

EXPONENTIAL = 1.0  # the shape of an exponential length (a coefficient of variation of 1): the default


def unit_lengths(u: np.ndarray | float, shape: float) -> np.ndarray | float:
    """Stall lengths of mean 1 from uniforms ``u`` in [0, 1): a gamma distribution's quantiles at ``u``
    for ``shape`` (its coefficient of variation 1 / sqrt(shape)); at :data:`EXPONENTIAL` exactly
    ``-log(1 - u)``, the exponential the stalls always had."""
    if shape == EXPONENTIAL:
        return -np.log(1.0 - u) if isinstance(u, np.ndarray) else -math.log(1.0 - u)
    return gammaincinv(shape, u) / shape
