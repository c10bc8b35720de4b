"""The Spark layer of rocketsim: only the code that needs pyspark.

The session (:mod:`~rocketsim.spark.session`), the jobs' command line (:mod:`~rocketsim.spark.cli`), the
schedulers that place the core stage on executors (:mod:`~rocketsim.spark.run` for a run,
:mod:`~rocketsim.spark.compare` for a comparison), the job steps (:mod:`~rocketsim.spark.pipeline`),
a job's life around them (:mod:`~rocketsim.spark.launch`: the run id's claim, input checks, one-line
failures), the Spark half of the Delta sink (:mod:`~rocketsim.spark.delta_sink`) and
:func:`~rocketsim.spark.read.read_spark`. Spark schedules and collects counts; every table is computed
by core functions in the tasks and on the driver. Nothing outside this package (and ``jobs/``,
``rocketsim/bench/``) imports pyspark.
"""

from __future__ import annotations
