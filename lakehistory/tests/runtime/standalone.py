"""A Spark standalone cluster on 127.0.0.1, started as an operator starts one: a master and
workers from Spark's own classes in the pinned pyspark (`spark-class ...Master`, `...Worker`),
each a process of its own, the workers with their own work folders where their executors run."""

from __future__ import annotations

import json
import os
import re
import subprocess
import urllib.request
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path

import pyspark

from lakehistory_tools.processes import free_port, stop, wait_until

SPARK_HOME = Path(pyspark.__file__).parent
MASTER_CLASS = "org.apache.spark.deploy.master.Master"
WORKER_CLASS = "org.apache.spark.deploy.worker.Worker"
FINISHED_TASK = re.compile(r"Executor: Finished task ")


@dataclass(frozen=True)
class Cluster:
    url: str  # spark://127.0.0.1:port, the master a Connect server is started with
    web_url: str  # the master's web UI, whose /json/ lists the workers
    work_dirs: tuple[Path, ...]  # one per worker: app-*/<executor id>/stderr is an executor's log

    def alive_workers(self) -> int:
        with urllib.request.urlopen(f"{self.web_url}/json/", timeout=10) as response:  # noqa: S310 - our own master
            return sum(worker["state"] == "ALIVE" for worker in json.load(response)["workers"])

    def finished_tasks(self) -> list[int]:
        """Per worker, the tasks its executors report finished in their logs."""
        return [
            sum(len(FINISHED_TASK.findall(log.read_text(errors="replace"))) for log in work.glob("app-*/*/stderr"))
            for work in self.work_dirs
        ]


def _spark_class(name: str, args: list[str], log: Path, stack: ExitStack) -> None:
    env = {**os.environ, "SPARK_HOME": str(SPARK_HOME), "SPARK_LOCAL_IP": "127.0.0.1"}
    env.pop("SPARK_REMOTE", None)
    with log.open("ab") as out:
        process = subprocess.Popen(  # noqa: S603 - Spark's own launcher from the pinned pyspark
            [str(SPARK_HOME / "bin" / "spark-class"), name, *args], stdout=out, stderr=subprocess.STDOUT, env=env
        )
    stack.callback(stop, process)


@contextmanager
def standalone_cluster(folder: Path, workers: int = 2, cores: int = 1, memory: str = "1g") -> Iterator[Cluster]:
    """A master and `workers` workers of `cores` cores and `memory` each; all stopped on exit,
    also when starting one of them fails."""
    folder.mkdir(parents=True, exist_ok=True)
    port, web_port = free_port(), free_port()
    cluster = Cluster(
        url=f"spark://127.0.0.1:{port}",
        web_url=f"http://127.0.0.1:{web_port}",
        work_dirs=tuple(folder / f"worker-{n}" for n in range(1, workers + 1)),
    )
    with ExitStack() as stack:
        master_log = folder / "master.log"
        _spark_class(
            MASTER_CLASS, ["--host", "127.0.0.1", "--port", str(port), "--webui-port", str(web_port)], master_log, stack
        )
        wait_until("the standalone master", lambda: cluster.alive_workers() >= 0, master_log)
        for work in cluster.work_dirs:
            work.mkdir()
            args = ["--host", "127.0.0.1", "--cores", str(cores), "--memory", memory, "--work-dir", str(work)]
            args += ["--webui-port", str(free_port()), cluster.url]
            _spark_class(WORKER_CLASS, args, work / "worker.log", stack)
        wait_until(f"{workers} workers", lambda: cluster.alive_workers() == workers, master_log)
        yield cluster
