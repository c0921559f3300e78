"""A SparkSession for Spindle's analytics, and its complete shutdown.

Facts this follows (measured with pyspark 4.3 on this machine, see issue 6):
* executors' Python must be this interpreter (PYSPARK_PYTHON) so they import
  spindle.spark_ext; the JVM must bind loopback (SPARK_LOCAL_IP) on hosts
  whose name does not resolve;
* `spark.stop()` leaves the JVM running: it exits when the gateway's stdin
  pipe closes, so `stop_session` closes it and waits, and clears pyspark's
  cached gateway so a later session starts a fresh JVM;
* the default 200 shuffle partitions make every GROUP BY over small data
  schedule 200 tasks: a local session uses a few.
"""
from __future__ import annotations

import hashlib
import os
import sys
import tempfile

DEFAULT_MASTER = "local[2]"
_LOG4J = """\
rootLogger.level = error
rootLogger.appenderRef.stderr.ref = console
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{yy/MM/dd HH:mm:ss} %p %c{1}: %m%n
logger.repl.name = org.apache.spark.repl.Main
logger.repl.level = error
logger.gateway.name = org.apache.spark.api.python.PythonGatewayServer
logger.gateway.level = error
logger.executor.name = org.apache.spark.executor.Executor
logger.executor.level = fatal
logger.tasks.name = org.apache.spark.scheduler.TaskSetManager
logger.tasks.level = fatal
"""


def prepare_environment() -> None:
    """Environment the driver JVM and Python workers inherit."""
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)


def _log4j_file() -> str:
    """Spark's own log4j profile prints INFO/WARN lines on every start; a
    console tool wants errors only. Failed tasks are not logged: their error
    reaches the caller as the job's error (no JVM stack over the console)."""
    digest = hashlib.sha1(_LOG4J.encode()).hexdigest()[:8]     # a new text, a new file
    path = os.path.join(tempfile.gettempdir(),
                        f"spindle-spark-log4j2-{os.getuid()}-{digest}.properties")
    if not os.path.exists(path):
        tmp = f"{path}.{os.getpid()}"
        with open(tmp, "w") as f:
            f.write(_LOG4J)
        os.replace(tmp, path)
    return path


def default_conf(master: str) -> dict[str, str]:
    local = master.startswith("local")
    java_options = [f"-Dlog4j2.configurationFile=file:{_log4j_file()}"]
    if local:
        # The driver runs the tasks: the throughput collector's cheaper
        # allocation and write barriers take ~15% off the task threads' CPU
        # (measured on the xlog scan + GROUP BY); pauses matter little here.
        java_options.append("-XX:+UseParallelGC")
    conf = {
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.session.timeZone": "UTC",
        "spark.sql.python.filterPushdown.enabled": "true",
        "spark.driver.extraJavaOptions": " ".join(java_options),
    }
    if local:
        conf["spark.sql.shuffle.partitions"] = "4"
        conf["spark.driver.host"] = "127.0.0.1"
        conf["spark.driver.bindAddress"] = "127.0.0.1"
    return conf


def start_session(master: str = DEFAULT_MASTER, conf: dict[str, str] | None = None,
                  app_name: str = "spindle"):
    """A SparkSession with the `xlog` and `snap` sources registered."""
    prepare_environment()
    from pyspark.sql import SparkSession   # late: ~0.3 s, and only callers of Spark pay it

    from .sources import register
    builder = SparkSession.builder.master(master).appName(app_name)
    for key, value in {**default_conf(master), **(conf or {})}.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    _quiet_python_loggers()
    register(spark)
    return spark


def _quiet_python_loggers() -> None:
    """pyspark logs every failed query with its whole JVM stack (JSON on
    stderr) before raising it; callers report the error themselves."""
    try:
        from pyspark.logger import PySparkLogger
    except ImportError:
        return
    for name in ("SQLQueryContextLogger", "DataFrameQueryContextLogger"):
        PySparkLogger.getLogger(name).disabled = True


def stop_session(spark, timeout: float = 30.0, *, jvm: bool = True) -> None:
    """Stop Spark (`spark` may be None) and, with `jvm`, end the JVM this
    process launched. Without `jvm` the gateway stays and the next session
    starts in the same JVM (seconds faster); settings of the driver JVM itself
    (spark.driver.memory, extraJavaOptions) then keep their old values."""
    from pyspark import SparkContext
    if spark is not None:
        spark.stop()
    if not jvm:
        return
    gateway = SparkContext._gateway
    if gateway is None:
        return
    proc = getattr(gateway, "proc", None)
    try:
        gateway.shutdown()
    finally:
        SparkContext._gateway = None
        SparkContext._jvm = None
        if proc is not None:
            # The JVM exits on EOF of its stdin (PythonGatewayServer).
            if proc.stdin is not None:
                proc.stdin.close()
            try:
                proc.wait(timeout)
            except Exception:
                proc.kill()          # our own child, by its Popen object
                proc.wait(timeout)
