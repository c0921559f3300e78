"""Helpers of the box.spark tests: a connection for long calls, the standalone
Spark cluster from the pip package, and process lookups."""
from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path

import tarantool

from ..integration.box_process import free_port
from ..integration.cluster import process_gone, wait_for


class LongEval:
    """An IPROTO connection for calls that wait for Spark (the cluster helper's
    connection gives up after 10 s; a first SparkSession takes longer)."""

    def __init__(self, node, timeout: float = 240.0):
        self.conn = tarantool.Connection("127.0.0.1", node.port, socket_timeout=timeout,
                                         reconnect_max_attempts=0, connect_now=True)

    def __call__(self, code: str, *args):
        data = self.conn.eval(code, list(args)).data
        return data[0] if data else None

    def close(self) -> None:
        self.conn.close()


def children(pid: int) -> list[int]:
    """Direct child processes of `pid` (from /proc)."""
    out = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        if int(fields[1]) == pid:
            out.append(int(entry))
    return out


def command_line(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""


def spark_home() -> Path:
    import pyspark
    return Path(pyspark.__file__).parent


class StandaloneSpark:
    """A standalone master and one worker started from pyspark's own
    bin/spark-class on 127.0.0.1; stopped by the Popen handles this object
    started, their work directories removed."""

    def __init__(self, workdir: Path):
        self.workdir = workdir
        self.port = free_port()
        self.procs: list[subprocess.Popen] = []
        self.logs: list[Path] = []
        workdir.mkdir(parents=True, exist_ok=True)

    @property
    def url(self) -> str:
        return f"spark://127.0.0.1:{self.port}"

    def _daemon(self, name: str, cls: str, *args: str) -> None:
        env = dict(os.environ, SPARK_LOCAL_IP="127.0.0.1", SPARK_HOME=str(spark_home()),
                   SPARK_LOG_DIR=str(self.workdir / "logs"), SPARK_NO_DAEMONIZE="1")
        log = self.workdir / f"{name}.log"
        self.logs.append(log)
        with open(log, "wb") as out:
            self.procs.append(subprocess.Popen(
                [str(spark_home() / "bin" / "spark-class"), cls, *args], env=env,
                stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT))

    def start(self) -> StandaloneSpark:
        self._daemon("master", "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                     "--port", str(self.port), "--webui-port", str(free_port()))
        self._daemon("worker", "org.apache.spark.deploy.worker.Worker", self.url,
                     "--host", "127.0.0.1", "--webui-port", str(free_port()),
                     "--cores", "2", "--memory", "2g",
                     "--work-dir", str(self.workdir / "worker"))
        wait_for(lambda: "Successfully registered with master" in self.output("worker"), 90,
                 "the standalone worker to register")
        return self

    def output(self, name: str) -> str:
        path = self.workdir / f"{name}.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def stop(self) -> None:
        for proc in reversed(self.procs):
            if proc.poll() is None:
                proc.terminate()
                try:
                    proc.wait(20)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait(20)
        for proc in self.procs:
            deadline = time.monotonic() + 10
            while not process_gone(proc.pid) and time.monotonic() < deadline:
                time.sleep(0.1)
        shutil.rmtree(self.workdir / "worker", ignore_errors=True)
        shutil.rmtree(self.workdir / "logs", ignore_errors=True)
