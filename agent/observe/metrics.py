"""The agent's Prometheus metrics, in a registry of its own (one per daemon).

Events are counted as they happen (relayed calls, placement decisions, refusals);
state (pool capacity, pending updates, the process) is read at scrape time from
the node agent by a custom collector, so it can never drift from the books.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any, Protocol

import grpc
from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from agent import __version__
from agent.observe.process import process_stats
from agent.policy.policy import PoolCapacity
from agent.relay.methods import KNOWN_METHODS

PREFIX = "numa_agent"
# A relayed call is the runtime's latency plus ours: sub-millisecond to seconds.
CALL_BUCKETS = (
    0.0005,
    0.001,
    0.0025,
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
    5.0,
    10.0,
)
# A policy decision is pure computation: tens of microseconds to milliseconds.
DECISION_BUCKETS = (0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.1)
REFUSAL_REASONS = ("invalid_argument", "resource_exhausted", "failed_precondition", "internal")


class PlacedLike(Protocol):
    @property
    def pool(self) -> str: ...

    @property
    def exclusive(self) -> bool: ...


class StateFileLike(Protocol):
    """What the collector reads from the state store (StateStore provides it)."""

    @property
    def write_failures(self) -> int: ...


class StateSource(Protocol):
    """What the scrape-time collector reads (NodeAgent provides it)."""

    def capacity(self) -> tuple[PoolCapacity, ...]: ...

    def pending_updates(self) -> int: ...

    def placements(self) -> Sequence[PlacedLike]: ...


OTHER_METHOD = "other"


def method_label(method: str) -> str:
    """`/runtime.v1.RuntimeService/Version` -> `RuntimeService/Version`; every method
    not in the CRI list -> `other`, so made-up names add no label sets."""
    if method not in KNOWN_METHODS:
        return OTHER_METHOD
    service, _, name = method.rpartition("/")
    return f"{service.rpartition('.')[2]}/{name}"


class AgentMetrics:
    """The metrics of one agent. It is a relay CallObserver (`observe_call`), a node
    PlacementObserver (`decided`, `refused`) and a ReconcileObserver (`repaired`,
    `resent`); `watch` names the node agent whose state is reported at scrape time."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self._calls = Histogram(
            f"{PREFIX}_cri_request_duration_seconds",
            "CRI calls relayed to the runtime, by method and status code, and their latency "
            "as kubelet sees it (runtime plus agent)",
            ["method", "code"],
            buckets=CALL_BUCKETS,
            registry=self.registry,
        )
        self._decisions = Histogram(
            f"{PREFIX}_placement_decision_seconds",
            "Placement decisions made by the policy (creates and resizes) and their latency",
            buckets=DECISION_BUCKETS,
            registry=self.registry,
        )
        self._refusals = Counter(
            f"{PREFIX}_placement_refusals",
            "Containers the agent refused to place, by reason (the gRPC code kubelet gets)",
            ["reason"],
            registry=self.registry,
        )
        for reason in REFUSAL_REASONS:
            self._refusals.labels(reason)
        self._repairs = Counter(
            f"{PREFIX}_reconcile_repairs",
            "Containers the periodic reconcile found running other than the agent placed "
            "them (by the kernel's view or the runtime's report), and sent their cpuset again",
            registry=self.registry,
        )
        self._resends = Counter(
            f"{PREFIX}_reconcile_resends",
            "Cpusets the periodic reconcile sent again without a detected difference "
            "(the kernel's view could not be read, or was narrower than the record)",
            registry=self.registry,
        )
        self._unrepairable = Counter(
            f"{PREFIX}_reconcile_unrepairable",
            "Processes the periodic reconcile found outside their container's cgroup, "
            "which no runtime call can move back (each counted once)",
            registry=self.registry,
        )
        # Label lookups take a lock and build a tuple; per-call cost stays a dict hit.
        # Keyed by label, not method name: bounded by the CRI list times the codes.
        self._call_children: dict[tuple[str, grpc.StatusCode], Any] = {}
        self._state = _StateCollector()
        self.registry.register(self._state)

    def watch(self, source: StateSource | None) -> None:
        self._state.source = source

    def watch_state_file(self, store: StateFileLike | None) -> None:
        self._state.store = store

    def observe_call(self, method: str, code: grpc.StatusCode, seconds: float) -> None:
        label = method_label(method)
        child = self._call_children.get((label, code))
        if child is None:
            child = self._calls.labels(label, code.name)
            self._call_children[label, code] = child
        child.observe(seconds)

    def decided(self, seconds: float) -> None:
        self._decisions.observe(seconds)

    def refused(self, reason: str) -> None:
        self._refusals.labels(reason).inc()

    def repaired(self) -> None:
        self._repairs.inc()

    def resent(self) -> None:
        self._resends.inc()

    def unrepairable(self) -> None:
        self._unrepairable.inc()


class _StateCollector(Collector):
    """Gauges computed when Prometheus scrapes, from the node agent's current books."""

    def __init__(self) -> None:
        self.source: StateSource | None = None
        self.store: StateFileLike | None = None

    def describe(self) -> list[Metric]:
        return []  # unchecked collector: its families depend on the machine

    def collect(self) -> Iterator[Metric]:
        yield from _process_families()
        store = self.store
        if store is not None:
            failures = CounterMetricFamily(
                f"{PREFIX}_state_write_failures",
                "State file writes that failed (read-only or full disk, state over its "
                "size limit); the agent keeps serving, and its log says why",
            )
            failures.add_metric([], store.write_failures)
            yield failures
        source = self.source
        if source is None:
            return
        pending = GaugeMetricFamily(
            f"{PREFIX}_pending_updates",
            "Containers whose new cpuset the runtime has not been told yet",
        )
        pending.add_metric([], source.pending_updates())
        yield pending
        yield from _pool_families(source.capacity(), source.placements())


def _process_families() -> Iterator[Metric]:
    stats = process_stats()
    info = GaugeMetricFamily(f"{PREFIX}_build_info", "The agent's version", labels=["version"])
    info.add_metric([__version__], 1)
    yield info
    cpu = CounterMetricFamily(
        f"{PREFIX}_process_cpu_seconds", "CPU time (user + system) the agent has used"
    )
    cpu.add_metric([], stats.cpu_seconds)
    yield cpu
    rss = GaugeMetricFamily(
        f"{PREFIX}_process_resident_memory_bytes", "The agent's resident memory"
    )
    rss.add_metric([], stats.rss_bytes)
    yield rss
    start = GaugeMetricFamily(
        f"{PREFIX}_process_start_time_seconds", "When the agent started, in Unix time"
    )
    start.add_metric([], stats.started)
    yield start


_POOL_GAUGES = (
    ("exclusive_cpus", "CPUs held by exclusive containers in the pool"),
    ("exclusive_free_cpus", "CPUs an exclusive container could still take in the pool"),
    ("shared_cpus", "CPUs the pool's shared containers run on"),
    ("shared_milli_cpus_used", "milliCPU requested by shared containers in the pool and below"),
    ("shared_milli_cpus_free", "milliCPU one more shared container could request in the pool"),
    ("containers", "Containers placed directly in the pool (shared and exclusive)"),
)


def _pool_families(
    capacity: Sequence[PoolCapacity], placements: Sequence[PlacedLike]
) -> Iterator[Metric]:
    counts: dict[str, int] = {}
    for placement in placements:
        counts[placement.pool] = counts.get(placement.pool, 0) + 1
    families = {
        key: GaugeMetricFamily(f"{PREFIX}_pool_{key}", text, labels=["pool"])
        for key, text in _POOL_GAUGES
    }
    for cap in capacity:
        values = {
            "exclusive_cpus": len(cap.exclusive),
            "exclusive_free_cpus": cap.exclusive_free,
            "shared_cpus": len(cap.shared),
            "shared_milli_cpus_used": cap.shared_milli_used,
            "shared_milli_cpus_free": cap.shared_milli_free,
            "containers": counts.pop(cap.pool, 0),
        }
        for key, value in values.items():
            families[key].add_metric([cap.pool], value)
    for pool, count in counts.items():  # "reserved", or a pool only the books know
        families["containers"].add_metric([pool], count)
    yield from families.values()
