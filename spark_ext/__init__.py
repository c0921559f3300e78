"""Spark analytics over Tarantool-format .xlog/.snap files.

Pure parts (no pyspark; cheap to import, testable without a JVM):
  values.py   MsgPack values -> JSON text
  rows.py     the column layout, row filters, space-name tracking
  scan.py     one file (or a block range) -> Arrow record batches
  plan.py     the `path` option -> ScanTasks (files, block ranges, start names)
  mirror.py   compact(): sealed xlogs -> Parquet, incrementally (the query
              helper there takes a SparkSession)
Spark parts (import pyspark):
  sources.py  the `xlog` and `snap` Python data sources
  session.py  SparkSession start with the needed settings, and full shutdown
(reader throughput: scripts/bench/spark.py)
"""
