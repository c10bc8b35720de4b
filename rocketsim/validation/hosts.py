"""The validation's hosts and its capacity fit's rounds: the constants the command's ``--help`` names, in a
module that imports nothing (``rocketsim validate --help`` loads neither the engine nor numba)."""

from __future__ import annotations

# producers.host_scheduler of the validation's runs: a Linux host, CFS sharing its cores between the
# runnable threads (rocketsim.validation.scenario)
HOST_SCHEDULER = "fair"
# producers.host_scheduler of --fit-host-capacity's rounds and of the runs simulated with their scale: the
# fair host that idles no core while a thread waits (with it the whole runs were measured,
# docs/validation.md; rocketsim.validation.host_capacity)
FIT_HOST_SCHEDULER = "fair_conserving"
FIT_ROUNDS = 4  # --fit-host-capacity: at most this many simulations
