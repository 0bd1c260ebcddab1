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
_last: ProcessStats | None = None  # the last full reading


def process_stats() -> ProcessStats:
    """Read from /proc; when no descriptor is left to read it (a connection flood
    took them all), CPU time comes from os.times(), which needs none, and memory and
    start time from the last full reading, so `status` still answers."""
    global _last
    proc = _SELF if _SELF.pid == os.getpid() else psutil.Process(os.getpid())  # after a fork
    try:
        with proc.oneshot():
            times = proc.cpu_times()
            rss = proc.memory_info().rss
            started = proc.create_time()
    except OSError:
        if _last is None or _last.pid != proc.pid:
            raise
        now = os.times()
        return ProcessStats(proc.pid, now.user + now.system, _last.rss_bytes, _last.started)
    _last = ProcessStats(proc.pid, times.user + times.system, rss, started)
    return _last


def uptime_seconds(stats: ProcessStats) -> float:
    return max(time.time() - stats.started, 0.0)
