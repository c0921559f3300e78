"""Spark analytics over Tarantool-format .xlog/.snap files, and box.spark's engine.

Pure parts (no pyspark; cheap to import, testable without a JVM):
  values.py   MsgPack values -> JSON text
  rows.py     the column layout, row filters, space-name tracking
  scan.py     one file (or a block range) -> Arrow record batches
  plan.py     the `path` option -> ScanTasks (files, block ranges, start names)
  mirror.py   compact(): sealed xlogs -> Parquet, incrementally (the query
              helper there takes a SparkSession)
  stream.py   tailing a live WAL: offsets, batch ranges across rotations
  spaces.py   a space's captured tuples -> an Arrow table (space_<name> views)
Spark parts (import pyspark):
  sources.py  the `xlog` and `snap` Python data sources (`xlog` also streams)
  session.py  SparkSession start with the needed settings, and full shutdown
  runner.py   box.spark's threads: session owner, job threads, cancel, progress
              (stdlib at import; pyspark is imported by its threads)
  context.py  what a job sees: views, spaces, results with the row limit
  jobs/       built-in jobs for box.spark.run()
(reader throughput: scripts/bench/spark.py)
"""
