"""Built-in box.spark jobs: `box.spark.run('<name>', {args})`.

Each module is a job file like any user's: it defines run(spark, ctx) and
returns a DataFrame (collected with the row limit) or plain data. The views
`xlog` and `snap` of the instance are registered before run() is called;
jobs that read other directories take them from ctx.args.

  ops_per_space     DML operations per space and type per time bucket
  hot_keys          the most written keys of each space
  txn_sizes         how many rows transactions have
  sync_latency      time from a synchronous transaction to its CONFIRM
  rollbacks         ROLLBACK rows and the rows they undid
  replication_lag   per instance, how late it wrote rows of other instances
"""
