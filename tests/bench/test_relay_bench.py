"""The relay benchmark's pieces: percentiles, the call driver, and one tiny run of the
whole thing against the in-memory runtime (real processes, real sockets)."""

from __future__ import annotations

import pytest

from benchmarks import report
from benchmarks.relay_bench import Plan, drive, evaluate, percentile


@pytest.mark.parametrize(("q", "value"), [(0.5, 50.0), (0.99, 99.0), (0.0, 1.0), (1.0, 100.0)])
def test_percentile_nearest_rank(q: float, value: float) -> None:
    assert percentile([float(i) for i in range(1, 101)], q) == value


@pytest.mark.parametrize("concurrency", [1, 4])
def test_drive_makes_every_call_once(concurrency: int) -> None:
    seen: list[int] = []
    run = drive(seen.append, 25, concurrency)
    assert sorted(seen) == list(range(25))
    assert len(run.latencies) == 25
    assert run.latencies == sorted(run.latencies)
    assert run.rate > 0


def test_tiny_run_against_the_memory_runtime() -> None:
    results = evaluate(Plan(calls=4, pod_starts=2, list_containers=10, rss_containers=6), None)
    memory = results["memory"]
    assert isinstance(memory, dict)
    ops = {(r["op"], r["concurrency"]) for r in memory["rows"]}
    assert ops == {
        (op, c)
        for op in ("Version", "ListContainers", "ContainerStatus", "pod start")
        for c in (1, 16)
    }
    assert memory["agent_containers"] == 6  # 2 + 2 pod starts, then topped up to 6
    assert memory["agent_rss_idle_mib"] > 0
    assert results["containerd"] == {"skipped": "not asked for"}
    assert "pod start" in report.relay_table(memory)
