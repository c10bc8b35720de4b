"""Validation against a real broker: measured runs of the real-broker harness beside rocketsim's
simulation of their exact schedules (``python -m rocketsim.validation``, docs/validation.md).

Pure parts (the core layer): a run's files as values (:mod:`~rocketsim.validation.measured`), the
harness's outcome classes (:mod:`~rocketsim.validation.classes`), a run as a scenario
(:mod:`~rocketsim.validation.scenario`), calibration from runs (:mod:`~rocketsim.validation.calibrate`)
and the comparison (:mod:`~rocketsim.validation.compare`). The folders are read in
``rocketsim.warehouse.measured_runs``, the report is ``rocketsim.present.validation_report``.
"""

from __future__ import annotations
