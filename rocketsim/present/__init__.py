"""What people look at: charts (:mod:`~rocketsim.present.plots`, :mod:`~rocketsim.present.plots_storage`),
readable frames (:mod:`~rocketsim.present.frames`), a run's tables loaded for the notebooks
(:mod:`~rocketsim.present.explore`) and the HTML report (:mod:`~rocketsim.present.report`).

Reads the warehouse with deltalake (no Spark); the charts need matplotlib (the ``notebooks`` extra).
"""

from __future__ import annotations
