"""The agent's own process: CPU seconds used and resident memory, via psutil."""

from __future__ import annotations

import os
import time
from dataclasses import dataclass

import psutil


@dataclass(frozen=True, slots=True)
class ProcessStats:
    pid: int
    cpu_seconds: float  # user + system since the process started
    rss_bytes: int
    started: float  # Unix time the process started


_SELF = psutil.Process(os.getpid())


def process_stats() -> ProcessStats:
    proc = _SELF if _SELF.pid == os.getpid() else psutil.Process(os.getpid())  # after a fork
    with proc.oneshot():
        times = proc.cpu_times()
        rss = proc.memory_info().rss
        started = proc.create_time()
    return ProcessStats(proc.pid, times.user + times.system, rss, started)


def uptime_seconds(stats: ProcessStats) -> float:
    return max(time.time() - stats.started, 0.0)
