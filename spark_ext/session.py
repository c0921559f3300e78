"""A SparkSession for Spindle's analytics, and its complete shutdown.

Facts this follows (measured with pyspark 4.3 on this machine, see issue 6):
* executors' Python must be this interpreter (PYSPARK_PYTHON) so they import
  spindle.spark_ext; the JVM must bind loopback (SPARK_LOCAL_IP) on hosts
  whose name does not resolve;
* `spark.stop()` leaves the JVM running: it exits when the gateway's stdin
  pipe closes, so `stop_session` closes it and waits, and clears pyspark's
  cached gateway so a later session starts a fresh JVM;
* the default 200 shuffle partitions make every GROUP BY over small data
  schedule 200 tasks: a local session uses a few;
* the JVM writes to the stdout/stderr it inherits, and so does every Python
  worker it forks (pyspark's daemon output is copied to the JVM's stderr):
  JDK warnings, log4j, a worker's BrokenPipeError traceback when a query is
  cancelled or a LIMIT stops reading. `start_session(output=...)` launches the
  JVM itself with both on a pipe whose lines go to `output`, so none of that
  reaches a terminal the caller draws on;
* Spark SQL creates `spark-warehouse/` in the working directory on first use
  of the catalog: it is pointed at a directory under the temp dir instead.
"""
from __future__ import annotations

import hashlib
import logging
import os
import sys
import tempfile
import threading
from typing import Callable

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
        "spark.sql.warehouse.dir": os.path.join(tempfile.gettempdir(),
                                                f"spindle-spark-warehouse-{os.getuid()}"),
    }
    if local:
        conf["spark.sql.shuffle.partitions"] = "4"
        conf["spark.driver.host"] = "127.0.0.1"
        conf["spark.driver.bindAddress"] = "127.0.0.1"
    return conf


def start_session(master: str = DEFAULT_MASTER, conf: dict[str, str] | None = None,
                  app_name: str = "spindle", *, output: Callable[[str], None] | None = None,
                  phase: Callable[[str], None] | None = None):
    """A SparkSession with the `xlog` and `snap` sources registered. With
    `output`, the JVM (if this call launches it) writes its stdout and stderr
    lines there, and so do pyspark's and py4j's Python loggers; `phase(text)`
    hears what the start is doing (for a progress line)."""
    phase = phase or (lambda text: None)
    prepare_environment()
    phase("loading pyspark")
    from pyspark.sql import SparkSession   # late: ~0.3 s, and only callers of Spark pay it

    from .sources import register
    settings = {**default_conf(master), **(conf or {})}
    if output is not None:
        _route_python_loggers(output)
        phase("starting the JVM")
        _launch_jvm(master, app_name, settings, output)
    phase("creating the SparkSession")
    builder = SparkSession.builder.master(master).appName(app_name)
    for key, value in settings.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    _quiet_python_loggers()
    phase("registering the xlog and snap sources")
    register(spark)
    return spark


def _launch_jvm(master: str, app_name: str, settings: dict[str, str],
                output: Callable[[str], None]) -> None:
    """Start the gateway JVM as pyspark would (same spark-submit settings: the
    driver's JVM options apply only at launch), with its output on a pipe; a
    gateway already running (the JVM kept between sessions) is left as it is."""
    from pyspark import SparkConf, SparkContext
    from pyspark.java_gateway import launch_gateway
    with SparkContext._lock:
        if SparkContext._gateway is not None:
            return
        conf = SparkConf(loadDefaults=False)
        conf.setMaster(master).setAppName(app_name)
        conf.setAll(list(settings.items()))
        read_end, write_end = os.pipe()
        try:
            gateway = launch_gateway(conf, popen_kwargs={"stdout": write_end,
                                                         "stderr": write_end})
        finally:
            os.close(write_end)       # the JVM (and its workers) hold their copies
        threading.Thread(target=_pump, args=(read_end, output), name="spark-jvm-output",
                         daemon=True).start()
        SparkContext._gateway = gateway
        SparkContext._jvm = gateway.jvm


def _pump(fd: int, output: Callable[[str], None]) -> None:
    """Lines of the JVM's output to `output` until every writer has closed the
    pipe (the JVM and its Python workers have exited)."""
    with open(fd, "rb", buffering=0) as pipe:
        for raw in iter(pipe.readline, b""):
            line = raw.decode("utf-8", "replace").rstrip()
            if line:
                try:
                    output(line)
                except Exception:   # noqa: BLE001 - a failing sink must not block the JVM
                    pass


class _LineHandler(logging.Handler):
    def __init__(self, output: Callable[[str], None]):
        super().__init__()
        self.output = output

    def emit(self, record: logging.LogRecord) -> None:
        try:
            text = self.format(record)
        except Exception:   # noqa: BLE001 - logging must never raise
            return
        for line in text.splitlines():
            if line.strip():
                self.output(line)


def _route_python_loggers(output: Callable[[str], None]) -> None:
    """py4j logs a broken connection (a cancelled job's answer) and pyspark its
    warnings through `logging`; without a handler Python prints them on
    stderr, i.e. over the console. They go to `output` instead."""
    for name in ("py4j", "pyspark"):
        logger = logging.getLogger(name)
        if any(isinstance(h, _LineHandler) for h in logger.handlers):
            continue
        handler = _LineHandler(output)
        handler.setFormatter(logging.Formatter("%(name)s: %(message)s"))
        logger.addHandler(handler)
        logger.propagate = False


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
