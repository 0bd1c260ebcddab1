"""What the relay costs: the same CRI calls direct to a runtime and through the agent
(`numa-agent run`, the real daemon in its own process), in the same run.

Latency p50/p99 and calls/s at concurrency 1 and 16 for Version, ListContainers
(100 containers), ContainerStatus and a pod start (RunPodSandbox + CreateContainer
+ StartContainer); the agent's CPU time per relayed call (psutil, its process) and
its RSS idle and with 500 containers. Backends: the in-memory runtime served over
gRPC in its own process, and a private containerd when this host can run one.
"""

from __future__ import annotations

import contextlib
import itertools
import math
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import psutil

from agent.introspect.server import status_socket_path
from agent.kubelet import kubelet_container_config, kubelet_pod_config
from agent.workload import QoSClass
from devtools.containerd import PrivateContainerd, missing_prerequisites
from devtools.criclient import CRIClient
from devtools.fakesysfs import write_shape
from devtools.pods import remove_cgroup

PY = sys.executable
READY_TIMEOUT_S = 30.0


@dataclass(frozen=True, slots=True)
class Plan:
    """How many calls each measurement makes (pod starts cost far more on containerd)."""

    calls: int = 1000
    pod_starts: int = 100
    list_containers: int = 100
    rss_containers: int = 500


QUICK = Plan(calls=60, pod_starts=8, list_containers=10, rss_containers=20)


def percentile(ordered: list[float], q: float) -> float:
    """The q-quantile (0..1) of sorted values, nearest rank."""
    if not ordered:
        return float("nan")
    index = min(len(ordered) - 1, max(0, math.ceil(q * len(ordered)) - 1))
    return ordered[index]


@dataclass(frozen=True, slots=True)
class Run:
    latencies: list[float]  # seconds, sorted
    wall: float  # seconds for all calls

    @property
    def p50_ms(self) -> float:
        return percentile(self.latencies, 0.5) * 1000

    @property
    def p99_ms(self) -> float:
        return percentile(self.latencies, 0.99) * 1000

    @property
    def rate(self) -> float:
        return len(self.latencies) / self.wall if self.wall > 0 else 0.0


def drive(call: Callable[[int], object], count: int, concurrency: int) -> Run:
    """`count` calls of `call(i)`, `concurrency` at a time; per-call latency and wall time."""
    latencies: list[float] = []
    lock = threading.Lock()
    counter = itertools.count()

    def worker() -> None:
        mine: list[float] = []
        while True:
            i = next(counter)
            if i >= count:
                break
            start = time.perf_counter()
            call(i)
            mine.append(time.perf_counter() - start)
        with lock:
            latencies.extend(mine)

    began = time.perf_counter()
    if concurrency == 1:
        worker()
    else:
        with ThreadPoolExecutor(concurrency) as pool:
            for f in [pool.submit(worker) for _ in range(concurrency)]:
                f.result()
    wall = time.perf_counter() - began
    return Run(sorted(latencies), wall)


class Process:
    """A helper process, ready once `socket` exists and `ready()` is true (the agent
    serves its CRI socket before its status socket and metrics: a bench asking those
    waits for them too); stopped with SIGTERM / stdin EOF."""

    def __init__(
        self,
        argv: list[str],
        socket: Path,
        log: Path,
        ready: Callable[[], bool] = lambda: True,
    ) -> None:
        self.log = log
        self._log = log.open("wb")
        self.proc = subprocess.Popen(
            argv, stdin=subprocess.PIPE, stdout=self._log, stderr=subprocess.STDOUT
        )
        self.ps = psutil.Process(self.proc.pid)
        deadline = time.monotonic() + READY_TIMEOUT_S
        while not (socket.exists() and ready()):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"{argv[:4]} did not start; log:\n{log.read_text()[-2000:]}")
            time.sleep(0.02)  # polling for a socket with a deadline

    def cpu(self) -> float:
        times = self.ps.cpu_times()
        return float(times.user + times.system)

    def rss_mib(self) -> float:
        return float(self.ps.memory_info().rss) / 2**20

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self.proc.stdin:
            self.proc.stdin.close()
        self._log.close()


def start_agent(base: Path, runtime_endpoint: str, sysfs: Path) -> Process:
    listen = base / "agent.sock"
    argv = [PY, "-m", "benchmarks.serve_agent", runtime_endpoint, str(listen)]
    argv += [str(base / "state"), str(sysfs)]
    # The status socket is the last one the agent opens (without metrics).
    return Process(argv, listen, base / "agent.log", status_socket_path(str(listen)).exists)


class Pods:
    """Pod starts as kubelet makes them (Burstable, 10m: 500 fit on a 2-CPU host);
    remembers what it started, for cleanup."""

    def __init__(self, client: CRIClient, image: str, log_root: str, cgroupfs: bool) -> None:
        self.client = client
        self.image = image
        self.log_root = log_root
        self.driver = "cgroupfs" if cgroupfs else "systemd"
        self.sandboxes: dict[str, str] = {}
        self._lock = threading.Lock()

    def start(self, name: str, containers: int = 1) -> list[str]:
        config = kubelet_pod_config(
            name,
            "bench",
            str(uuid.uuid4()),
            qos=QoSClass.BURSTABLE,
            cgroup_driver=self.driver,
            log_root=self.log_root,
        )
        sandbox = self.client.run_pod_sandbox(config)
        with self._lock:
            self.sandboxes[sandbox] = config.linux.cgroup_parent
        ids = []
        for c in range(containers):
            spec = kubelet_container_config(
                config, f"c{c}", 10, 0, image=self.image, command=["/bin/sleep", "3600"]
            )
            cid = self.client.create_container(sandbox, spec, config)
            self.client.start_container(cid)
            ids.append(cid)
        return ids

    def remove_all(self, cgroups: bool) -> None:
        for sandbox, parent in list(self.sandboxes.items()):
            self.client.stop_pod_sandbox(sandbox)
            self.client.remove_pod_sandbox(sandbox)
            if cgroups:
                remove_cgroup(parent)
        self.sandboxes.clear()


@dataclass(slots=True)
class Backend:
    name: str
    endpoint: str
    sysfs: Path
    image: str
    log_root: str
    real: bool  # containerd: pods are processes, cgroups to clean


def measure_backend(backend: Backend, base: Path, plan: Plan) -> dict[str, object]:
    """Every measurement for one backend: direct and through the agent, same run."""
    agent = start_agent(base, backend.endpoint, backend.sysfs)
    rows: list[dict[str, object]] = []
    out: dict[str, object] = {"backend": backend.name, "rows": rows}
    direct = CRIClient(backend.endpoint, timeout=60)
    relayed = CRIClient(str(base / "agent.sock"), timeout=60)
    direct_pods = Pods(direct, backend.image, backend.log_root, backend.real)
    agent_pods = Pods(relayed, backend.image, backend.log_root, backend.real)
    try:
        time.sleep(0.5)  # let the agent's start-up work (reconcile, first save) finish
        out["agent_rss_idle_mib"] = round(agent.rss_mib(), 1)
        # 100 containers for ListContainers, started directly (the agent does not care).
        per_pod = 10
        for p in range(plan.list_containers // per_pod):
            direct_pods.start(f"list-{p}", per_pod)
        status_id = direct.list_containers()[0].id

        ops: dict[str, tuple[Callable[[CRIClient, Pods], Callable[[int], object]], int]] = {
            "Version": (lambda c, _: lambda i: c.version(), plan.calls),
            "ListContainers": (lambda c, _: lambda i: c.list_containers(), plan.calls // 2),
            "ContainerStatus": (lambda c, _: lambda i: c.container_status(status_id), plan.calls),
            "pod start": (
                lambda _, pods: lambda i: pods.start(f"p-{uuid.uuid4().hex[:8]}"),
                plan.pod_starts,
            ),
        }
        for op, (make, count) in ops.items():
            for concurrency in (1, 16):
                row: dict[str, object] = {"op": op, "concurrency": concurrency, "calls": count}
                # Alternate direct and relayed so drift (caches, GC) hits both alike.
                d = drive(make(direct, direct_pods), count, concurrency)
                cpu0 = agent.cpu()
                a = drive(make(relayed, agent_pods), count, concurrency)
                cpu = agent.cpu() - cpu0
                row.update(
                    direct_p50_ms=round(d.p50_ms, 3),
                    direct_p99_ms=round(d.p99_ms, 3),
                    direct_per_s=round(d.rate, 1),
                    agent_p50_ms=round(a.p50_ms, 3),
                    agent_p99_ms=round(a.p99_ms, 3),
                    agent_per_s=round(a.rate, 1),
                    agent_cpu_ms_per_call=round(cpu * 1000 / count, 3),
                )
                rows.append(row)
        # RSS with N containers the agent placed (pod starts above count).
        placed = len(agent_pods.sandboxes)
        index = 0
        while placed < plan.rss_containers:
            agent_pods.start(f"rss-{index}")
            index += 1
            placed += 1
        out["agent_containers"] = placed
        out["agent_rss_with_containers_mib"] = round(agent.rss_mib(), 1)
    finally:
        with contextlib.suppress(Exception):
            agent_pods.remove_all(backend.real)
        with contextlib.suppress(Exception):
            direct_pods.remove_all(backend.real)
        relayed.close()
        direct.close()
        agent.stop()
    return out


def memory_backend(base: Path, plan: Plan) -> dict[str, object]:
    socket = base / "rt.sock"
    runtime = Process([PY, "-m", "benchmarks.serve_memory", str(socket)], socket, base / "rt.log")
    sysfs = write_shape("xeon-2s-2numa", base / "sysfs")
    try:
        backend = Backend(
            "memory", f"unix://{socket}", sysfs, "busybox", "/tmp/na-bench-logs", False
        )
        return measure_backend(backend, base, plan)
    finally:
        runtime.stop()


def containerd_backend(base: Path, plan: Plan) -> dict[str, object]:
    with PrivateContainerd(base / "ctrd") as ctrd:
        backend = Backend(
            "containerd",
            ctrd.endpoint,
            Path("/sys"),
            ctrd.image,
            str(ctrd.pod_log_root),
            True,
        )
        out = measure_backend(backend, base, plan)
        out["containerd_version"] = ctrd.client().version().runtime_version
        return out


CONTAINERD_PLAN = Plan(calls=400, pod_starts=16, list_containers=100, rss_containers=40)


@contextlib.contextmanager
def scratch() -> Iterator[Path]:
    # Short: unix socket paths are limited to 107 bytes.
    base = Path(tempfile.mkdtemp(prefix="na-rb-", dir="/tmp"))
    try:
        yield base
    finally:
        shutil.rmtree(base, ignore_errors=True)


def evaluate(
    plan: Plan = Plan(), containerd_plan: Plan | None = CONTAINERD_PLAN
) -> dict[str, object]:
    """Both backends (containerd only when this host can run it)."""
    results: dict[str, object] = {}
    with scratch() as base:
        results["memory"] = memory_backend(base, plan)
    missing = missing_prerequisites()
    if containerd_plan is None:
        results["containerd"] = {"skipped": "not asked for"}
    elif missing:
        results["containerd"] = {"skipped": "; ".join(missing)}
    else:
        with scratch() as base:
            results["containerd"] = containerd_backend(base, containerd_plan)
    return results
