"""OpenMessaging Benchmark's result files (``TestResult`` JSON), read and written (core: no file I/O).

* :mod:`~rocketsim.omb.hdr`: HdrHistogram's arithmetic, which every figure of the file comes from;
* :mod:`~rocketsim.omb.result`: a run's sends folded into OMB's 10 s windows and written as a
  ``TestResult`` (the export);
* :mod:`~rocketsim.omb.measured`: any ``TestResult`` file (old or new schema) read into an
  :class:`~rocketsim.omb.measured.OmbRun` that charts put beside a simulated run (the import);
* :mod:`~rocketsim.omb.rerun`: a comparison's variant simulated again for its export.

The warehouse side (reading a run's tables, writing the files) is :mod:`rocketsim.warehouse.omb`.
"""

from __future__ import annotations

DEFAULT_DRIVER = "rocketsim"  # OMB's chart lines are labelled by driver: a simulated run says so
