"""Incident replay: an incident's per-broker time series (Prometheus range queries, Grafana CSV) turned
into rocketsim's fault timeline, and a scenario that replays it on the user's own cluster and workload
(core: no file I/O; ``jobs/replay.py`` reads the files and writes the scenario).

* :mod:`~rocketsim.replay.series`: the input formats, read into :class:`~rocketsim.replay.series.Series`;
* :mod:`~rocketsim.replay.timeline`: the algorithm (normalise, resample to 10 s, baseline, signals,
  segment, map to faults; what is left to the model);
* :mod:`~rocketsim.replay.buckets`: a slowdown factor from histogram buckets;
* :mod:`~rocketsim.replay.scenario_text`: the base scenario's text with the incident's faults.
"""

from __future__ import annotations
