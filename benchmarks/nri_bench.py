"""NRI door speed: how long the runtime waits for the plugin. CreateContainer's
answer at 512 CPUs with 500 containers placed, and Synchronize with 500
containers (restored from the state file, and adopted with none), against the
runtime stand-in over a real unix socket (a generated event stream: kubelet-shaped
pods, a mix of QoS classes and affinity rules); and, when a containerd 2 build
is named by NUMA_AGENT_CONTAINERD2_DIR, the same calls on real containerd 2 (on
this VM's own CPUs, so with fewer containers).

The numbers are the runtime's view: request sent to reply read. containerd gives
a plugin 2 s per request (plugin_request_timeout); the goals are CreateContainer
under 50 ms p99 and Synchronize with 500 containers under 1 s.
"""

from __future__ import annotations

import argparse
import contextlib
import random
import shutil
import statistics
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from agent.kubelet import kubelet_container_config, kubelet_pod_config
from agent.node.agent import NodeAgent
from agent.node.fingerprint import machine_fingerprint
from agent.nri.connection import RpcError
from agent.nri.plugin import NriPlugin
from agent.nri.runtime import NriRuntime
from agent.nri.session import NriSession
from agent.policy.config import PolicyConfig
from agent.state.store import StateStore
from agent.workload import QoSClass
from benchmarks import placement_bench
from devtools.containerd import PrivateContainerd, containerd2_dir, missing_prerequisites
from devtools.criclient import CRIError
from devtools.nri_runtime import NriRuntimeStandIn
from devtools.pods import PodRunner, sleeper_config
from topology.sysfs import read_machine
from topology.tree import Machine

SPEC_NAME = "2s x 2numa x 64c x 2t (512)"
GIB = 1 << 30


@dataclass(frozen=True, slots=True)
class Plan:
    placed: int = 500
    samples: int = 200
    real_containers: int = 20  # on containerd 2: this VM's CPUs, real processes
    real_samples: int = 10


QUICK = Plan(placed=30, samples=20, real_containers=3, real_samples=3)


def _ms(values: list[float]) -> dict[str, float]:
    ordered = sorted(values)
    p99 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]
    return {
        "n": len(ordered),
        "p50_ms": round(statistics.median(ordered) * 1000, 2),
        "p99_ms": round(p99 * 1000, 2),
        "max_ms": round(ordered[-1] * 1000, 2),
    }


def _workload(serial: int, rng: random.Random) -> tuple[Any, Any]:
    """One kubelet-shaped pod and container: placement_bench's mix of QoS classes
    and cri-resource-manager affinity rules."""
    drawn = placement_bench.draw(rng)
    app, qos, milli, limit = drawn.app, drawn.qos, drawn.milli, drawn.limit
    pod = kubelet_pod_config(
        f"{app}-{serial}",
        "default",
        f"uid-{serial}",
        labels={"app": app},
        annotations=drawn.annotations,
        qos=qos,
    )
    config = kubelet_container_config(
        pod, "app", milli, milli if limit is None else limit, GIB if limit is None else 0
    )
    return pod, config


class _Plugged:
    def __init__(self, machine: Machine, path: str, state: Path, index: str = "90") -> None:
        self.runtime = NriRuntime(path)
        store = StateStore(state, machine_fingerprint(machine))
        self.node = NodeAgent(machine, PolicyConfig(), self.runtime, store=store)
        self.plugin = NriPlugin(self.node, self.runtime)
        self.handled: dict[str, list[float]] = {}
        serve = self.plugin.serve

        def timed(service: str, method: str, payload: bytes) -> bytes:
            began = time.perf_counter()
            try:
                return serve(service, method, payload)
            finally:
                self.handled.setdefault(method, []).append(time.perf_counter() - began)

        self.plugin.serve = timed  # type: ignore[method-assign]
        self.session = NriSession(path, index, self.plugin, self.runtime, backoff_of=lambda n: 0.05)
        self.session.start()

    def stop(self) -> None:
        self.session.stop()
        self.node.close()


def standin(plan: Plan) -> dict[str, Any]:
    """CreateContainer and Synchronize against the stand-in at 512 CPUs."""
    machine = placement_bench.machine(placement_bench.MACHINES[SPEC_NAME])
    rng = random.Random(512)
    out: dict[str, Any] = {"machine": SPEC_NAME}
    with tempfile.TemporaryDirectory(prefix="nri-bench-") as tmp:
        base = Path(tmp)
        with NriRuntimeStandIn(base / "nri.sock", request_timeout_s=10) as runtime:
            plugged = _Plugged(machine, runtime.path, base / "state")
            assert runtime.wait_ready(30), "the plugin did not synchronize"
            serial = 0
            while len(runtime.containers) < plan.placed:
                serial += 1
                pod, config = _workload(serial, rng)
                pod_id = runtime.run_pod(pod)
                try:
                    cid = runtime.create_container(pod_id, config)
                except RpcError:
                    runtime.remove_pod(pod_id)
                    continue
                runtime.start_container(cid)
            out["placed"] = len(plugged.node.placements())
            runtime.recorded.seconds.clear()
            plugged.handled.clear()
            for _ in range(plan.samples):
                serial += 1
                pod, config = _workload(serial, rng)
                pod_id = runtime.run_pod(pod)
                with contextlib.suppress(RpcError):
                    runtime.create_container(pod_id, config)
                runtime.remove_pod(pod_id)  # back to `placed`
            out["create_container"] = _ms(runtime.recorded.seconds["CreateContainer"])
            out["create_container_in_plugin"] = _ms(plugged.handled["CreateContainer"])
            out["stop_container"] = _ms(runtime.recorded.seconds["StopContainer"])
            plugged.stop()
            # The agent restarts: the runtime synchronizes it with what runs.
            for label, state in (("restored", base / "state"), ("adopted", base / "empty")):
                runtime.disconnect()
                runtime.recorded.seconds.clear()
                again = _Plugged(machine, runtime.path, state)
                assert runtime.wait_ready(60), "no Synchronize"
                out[f"synchronize_{label}"] = {
                    "containers": len(runtime.containers),
                    "updates": len(runtime.recorded.synchronize_updates),
                    **_ms(runtime.recorded.seconds["Synchronize"]),
                }
                runtime.recorded.synchronize_updates.clear()
                again.stop()
    return out


def containerd2(plan: Plan, bin_dir: Path) -> dict[str, Any]:
    """The same calls on a real containerd 2 (CRI CreateContainer with and without
    the plugin, the plugin's own time, Synchronize at restart)."""
    base = Path(tempfile.mkdtemp(prefix="nri-bench-c2-"))
    ctrd = PrivateContainerd(base, bin_dir=bin_dir)
    out: dict[str, Any] = {"containerd": str(bin_dir)}
    try:
        ctrd.start(timeout=60)
        machine = read_machine(Path("/sys"), cpu_info=False)
        out["cpus"] = len(machine.online_cpus) if hasattr(machine, "online_cpus") else None
        pods = PodRunner(ctrd.client(), log_root=str(ctrd.pod_log_root), namespace="bench")

        def create(name: str, qos: QoSClass, milli: int) -> tuple[str, float]:
            pod = pods.pod_config(name, qos=qos)
            sandbox = pods.run(pod)
            config = sleeper_config(pod, qos, milli, ctrd.image)
            began = time.perf_counter()
            cid = ctrd.client().create_container(sandbox, config, pod)
            took = time.perf_counter() - began
            ctrd.client().start_container(cid)
            return sandbox, took

        def samples(tag: str) -> list[float]:
            times = []
            for n in range(plan.real_samples):
                sandbox, took = create(f"{tag}-{n}", QoSClass.GUARANTEED, 1000)
                times.append(took)
                pods.remove(sandbox)
            return times

        out["create_without_plugin"] = _ms(samples("bare"))
        plugged = _Plugged(machine, str(ctrd.paths.nri_socket), base / "state")
        assert plugged.plugin.wait_synchronized(1, 30), "containerd did not synchronize"
        for n in range(plan.real_containers):
            # BestEffort: a few CPUs here, and each exclusive sample needs one free.
            create(f"shared-{n}", QoSClass.BESTEFFORT, 0)
        plugged.handled.clear()
        out["create_with_plugin"] = _ms(samples("nri"))
        out["create_container_in_plugin"] = _ms(plugged.handled["CreateContainer"])
        plugged.stop()
        again = _Plugged(machine, str(ctrd.paths.nri_socket), base / "state")
        assert again.plugin.wait_synchronized(1, 30), "containerd did not synchronize"
        out["synchronize_in_plugin"] = {
            "containers": plan.real_containers,
            **_ms(again.handled["Synchronize"]),
        }
        again.stop()
        pods.remove_all()
    except CRIError as err:
        out["error"] = str(err)
    finally:
        ctrd.stop()
        shutil.rmtree(base, ignore_errors=True)
    return out


def evaluate(plan: Plan, bin_dir: Path | None) -> dict[str, Any]:
    result: dict[str, Any] = {"plan": asdict(plan), "standin": standin(plan)}
    if bin_dir is None:
        result["containerd2"] = "not measured: NUMA_AGENT_CONTAINERD2_DIR is not set"
    elif missing_prerequisites(bin_dir):
        result["containerd2"] = "not measured: " + "; ".join(missing_prerequisites(bin_dir))
    else:
        result["containerd2"] = containerd2(plan, bin_dir)
    return result


def table(result: dict[str, Any]) -> str:
    rows = [
        "| where | call | n | p50 ms | p99 ms | max ms |",
        "| --- | --- | --- | --- | --- | --- |",
    ]

    def line(where: str, call: str, m: dict[str, Any]) -> str:
        return f"| {where} | {call} | {m['n']} | {m['p50_ms']} | {m['p99_ms']} | {m['max_ms']} |"

    s = result["standin"]
    where = f"stand-in, 512 CPUs, {s['placed']} placed"
    for key in ("create_container", "create_container_in_plugin", "stop_container"):
        rows.append(line(where, key, s[key]))
    for label in ("restored", "adopted"):
        sync = s[f"synchronize_{label}"]
        rows.append(
            line(
                f"stand-in, {sync['containers']} containers",
                f"synchronize ({label}, {sync['updates']} updates)",
                sync,
            )
        )
    c = result["containerd2"]
    if isinstance(c, dict) and "error" not in c:
        where = f"containerd 2, this VM, {result['plan']['real_containers']} running"
        for key in ("create_without_plugin", "create_with_plugin", "create_container_in_plugin"):
            rows.append(line(where, key, c[key]))
        rows.append(line(where, "synchronize_in_plugin", c["synchronize_in_plugin"]))
    else:
        rows.append(f"| containerd 2 | - | - | - | - | {c if isinstance(c, str) else c['error']} |")
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="tiny sizes: checks that it runs")
    parser.add_argument("--no-containerd", action="store_true")
    args = parser.parse_args(argv)
    bin_dir = None if args.no_containerd else containerd2_dir()
    result = evaluate(QUICK if args.quick else Plan(), bin_dir)
    print(table(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
