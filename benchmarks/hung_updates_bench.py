"""Updates never wait behind a stranger's trouble: with N containers whose shims
hang, how long a healthy shared container takes to leave a CPU that a new
Guaranteed container just got.

The node agent (background updates, as `numa-agent run` has them) in front of the
in-memory runtime; updates to the hung containers block until their deadline
(`--deadline`, the agent's update_timeout) and then fail, as a call to a stopped
shim does. Measured: from the Guaranteed container's CreateContainer answer to
the healthy container's narrowing reaching the runtime, for N = 0, 1, 3, 10 hung
containers. Before issue 26 every update went through one queue: the healthy one
waited about N deadlines.

Usage: python -m benchmarks.hung_updates_bench [--deadline S] [--trials K]
"""

from __future__ import annotations

import argparse
import json
import logging
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import grpc

from agent.kubelet import kubelet_container_config, kubelet_pod_config
from agent.node.agent import CREATE_CONTAINER, RUN_POD_SANDBOX, START_CONTAINER, NodeAgent
from agent.node.runtime_access import InProcessRuntimeAccess
from agent.policy.config import PolicyConfig
from agent.relay.backend import BackendError
from agent.runtime.inprocess import IN_PROCESS_ENDPOINT, in_process_forward
from agent.runtime.memory import MemoryRuntime
from agent.workload import QoSClass
from devtools.fakesysfs import write_shape
from proto import cri_pb2
from topology.cpuset import CPUSet
from topology.sysfs import read_machine

HUNG = (0, 1, 3, 10)
SHAPE = "desktop-1s-4c-ht"


class HangingAccess(InProcessRuntimeAccess):
    """Updates to `hung` containers block for `deadline` seconds, then fail as a
    call whose deadline passed; every update of `watch` is recorded with its time."""

    def __init__(self, runtime: MemoryRuntime, deadline: float) -> None:
        super().__init__(runtime)
        self.deadline = deadline
        self.hung: set[str] = set()
        self.release = threading.Event()
        self.watch = ""
        self.seen: list[tuple[float, CPUSet]] = []
        self.changed = threading.Condition()

    def update_container_resources(
        self, container_id: str, linux: cri_pb2.LinuxContainerResources
    ) -> None:
        if container_id in self.hung:
            self.release.wait(self.deadline)
            raise BackendError(
                "UpdateContainerResources",
                IN_PROCESS_ENDPOINT,
                grpc.StatusCode.DEADLINE_EXCEEDED,
                "hung shim",
            )
        super().update_container_resources(container_id, linux)
        if container_id == self.watch:
            with self.changed:
                self.seen.append((time.perf_counter(), CPUSet.parse(linux.cpuset_cpus)))
                self.changed.notify_all()

    def left(self, cpu: int, since: float, timeout: float) -> float | None:
        """When an update at or after `since` took `watch` off `cpu` (None: none came)."""

        def found() -> float | None:
            return next((t for t, cpus in self.seen if t >= since and cpu not in cpus), None)

        with self.changed:
            self.changed.wait_for(lambda: found() is not None, timeout)
            return found()


def _call(agent: NodeAgent, runtime: MemoryRuntime, method: str, request: Any) -> bytes:
    return agent.handlers()[method](
        request.SerializeToString(), in_process_forward(runtime, method)
    )


def _container(
    agent: NodeAgent, runtime: MemoryRuntime, name: str, qos: QoSClass, milli: int
) -> str:
    pod = kubelet_pod_config(name, "bench", f"uid-{name}", qos=qos)
    reply = _call(agent, runtime, RUN_POD_SANDBOX, cri_pb2.RunPodSandboxRequest(config=pod))
    sandbox = cri_pb2.RunPodSandboxResponse.FromString(reply).pod_sandbox_id
    guaranteed = qos is QoSClass.GUARANTEED
    config = kubelet_container_config(
        pod, "app", milli, milli if guaranteed else 0, (64 << 20) if guaranteed else 0
    )
    request = cri_pb2.CreateContainerRequest(
        pod_sandbox_id=sandbox, config=config, sandbox_config=pod
    )
    cid = cri_pb2.CreateContainerResponse.FromString(
        _call(agent, runtime, CREATE_CONTAINER, request)
    ).container_id
    _call(agent, runtime, START_CONTAINER, cri_pb2.StartContainerRequest(container_id=cid))
    return str(cid)


def one_trial(hung: int, deadline: float, machine: Any) -> float:
    """Milliseconds from the second Guaranteed create's call to the healthy container's
    update that takes it off that container's new CPU."""
    runtime = MemoryRuntime()
    access = HangingAccess(runtime, deadline)
    agent = NodeAgent(machine, PolicyConfig(), access, background_updates=True)
    try:
        hung_ids = [
            _container(agent, runtime, f"hung-{i}", QoSClass.BESTEFFORT, 0) for i in range(hung)
        ]
        healthy = _container(agent, runtime, "healthy", QoSClass.BESTEFFORT, 0)
        assert agent.wait_for_updates(10)
        access.hung.update(hung_ids)
        access.watch = healthy
        # A first exclusive container: the hung ones' narrowing is now stuck (in
        # flight or backing off), as with shims stopped mid-update.
        _container(agent, runtime, "first", QoSClass.GUARANTEED, 1000)
        start = time.perf_counter()
        second = _container(agent, runtime, "second", QoSClass.GUARANTEED, 1000)
        placed = {p.container_id: p for p in agent.placements()}
        (cpu,) = CPUSet.parse(placed[second].cpuset_cpus)
        left = access.left(cpu, start, deadline * (hung + 2) + 5)
        if left is None:
            raise RuntimeError(f"the healthy container never left CPU {cpu}")
        return (left - start) * 1000
    finally:
        access.release.set()
        agent.close()


def evaluate(deadline: float, trials: int) -> list[dict[str, Any]]:
    with tempfile.TemporaryDirectory() as tmp:
        write_shape(SHAPE, Path(tmp) / SHAPE)
        machine = read_machine(Path(tmp) / SHAPE, cpu_info=False)
    rows = []
    for hung in HUNG:
        times = sorted(one_trial(hung, deadline, machine) for _ in range(trials))
        rows.append(
            {
                "hung": hung,
                "deadline_s": deadline,
                "trials": trials,
                "median_ms": round(statistics.median(times), 2),
                "max_ms": round(times[-1], 2),
            }
        )
    return rows


def table(rows: list[dict[str, Any]]) -> str:
    lines = [
        "healthy container leaves a newly exclusive CPU "
        f"(update deadline {rows[0]['deadline_s']}s)",
        f"{'hung containers':>16} {'median ms':>10} {'max ms':>10}",
    ]
    lines += [f"{r['hung']:>16} {r['median_ms']:>10} {r['max_ms']:>10}" for r in rows]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--deadline", type=float, default=5.0, help="update deadline (5 s)")
    parser.add_argument("--trials", type=int, default=5)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    logging.disable(logging.WARNING)  # the hung containers' failures are the point here
    rows = evaluate(args.deadline, args.trials)
    print(json.dumps(rows, indent=2) if args.json else table(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
