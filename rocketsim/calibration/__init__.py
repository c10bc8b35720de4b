"""Calibration from users' measurements: their latency, error and throughput files -> the broker model's
values, as a scenario fragment, with the fit error of each input.

Pure (the core layer): parsers take the text of a file and a source name
(:mod:`~rocketsim.calibration.formats`), fitting takes measurements
(:mod:`~rocketsim.calibration.calibrate`); files are read in ``rocketsim.warehouse.calibration_inputs``,
the report is ``rocketsim.present.calibration_report``, the command ``jobs/calibrate.py``.
"""

from __future__ import annotations
