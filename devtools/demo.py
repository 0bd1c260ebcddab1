"""`make demo` (`python -m devtools.demo` in the checkout): the agent in front of a
real runtime, driven as kubelet drives it.

Starts a private containerd when this machine can run one (root, containerd and
runc installed), else the in-memory runtime; starts the agent in front of it;
runs a few pods through the agent's CRI socket; prints the machine with who
runs where (and, on containerd, what the kernel enforces); stops everything.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import sys
import tempfile
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from agent.config import AgentConfig
from agent.daemon import Daemon
from agent.kubelet import kubelet_container_config
from agent.logs import setup_logging
from agent.simulate.driver import simulate_file
from agent.simulate.output import render_text as render_simulation
from agent.workload import QoSClass
from devtools.containerd import PrivateContainerd, missing_prerequisites, read_proc_status
from devtools.criclient import CRIClient, CRIError
from devtools.fake_runtime import serve_memory_runtime
from devtools.pods import PodRunner
from topology.render import render_text

DEMO_NAMESPACE = "demo"


@dataclass
class Runtime:
    endpoint: str
    description: str
    image: str
    log_root: str
    containerd: PrivateContainerd | None = None


@contextlib.contextmanager
def demo_runtime(base: Path) -> Iterator[Runtime]:
    missing = missing_prerequisites()
    if not missing:
        with contextlib.ExitStack() as stack:
            env = PrivateContainerd(base / "containerd")
            env.start()
            stack.callback(env.stop)
            version = env.client().version()
            yield Runtime(
                env.endpoint,
                f"{version.runtime_name} {version.runtime_version} (private instance, "
                f"started in {env.started_in:.2f}s)",
                env.image,
                str(env.pod_log_root),
                env,
            )
        return
    server, _ = serve_memory_runtime(base / "memory-runtime.sock")
    try:
        yield Runtime(
            f"unix://{base / 'memory-runtime.sock'}",
            f"the in-memory CRI runtime (no containerd here: {'; '.join(missing)})",
            "localhost/numa-agent/busybox:1",
            str(base / "pod-logs"),
        )
    finally:
        server.stop(None)


class DemoPods:
    """Pods run through the agent's socket as kubelet would, with their names."""

    def __init__(self, client: CRIClient, runtime: Runtime) -> None:
        self.runner = PodRunner(
            client,
            log_root=runtime.log_root,
            namespace=DEMO_NAMESPACE,
            remove_cgroups=runtime.containerd is not None,
        )
        self.runtime = runtime
        self.names: dict[str, str] = {}  # container id -> "pod/container"

    def run(
        self,
        name: str,
        qos: QoSClass,
        cpu_milli: int,
        memory: int,
        annotations: dict[str, str] | None = None,
    ) -> tuple[str, str]:
        uid = str(uuid.uuid5(uuid.NAMESPACE_DNS, f"{name}.numa-agent.demo"))
        pod = self.runner.pod_config(name, qos, annotations, uid=uid)
        sandbox = self.runner.run(pod)
        guaranteed = qos is QoSClass.GUARANTEED
        config = kubelet_container_config(
            pod,
            "app",
            cpu_milli,
            cpu_milli if guaranteed else 0,
            memory if guaranteed else 0,
            image=self.runtime.image,
            command=["/bin/sleep", "3600"],
        )
        container = self.runner.start_container(sandbox, pod, config)
        self.names[container] = f"{name}/app"
        return sandbox, container

    def remove(self, sandbox: str) -> None:
        self.runner.remove(sandbox)

    def remove_all(self) -> None:
        # On the way out after an error: remove what can be removed.
        for sandbox in list(self.runner.sandboxes):
            with contextlib.suppress(CRIError):
                self.runner.remove(sandbox)


def where(pods: DemoPods, runtime_client: CRIClient, runtime: Runtime, container: str) -> str:
    status = runtime_client.container_status(container).status
    cpus = status.resources.linux.cpuset_cpus or "(all)"
    mems = status.resources.linux.cpuset_mems or "(all)"
    line = f"{pods.names[container]:<14} cpuset_cpus={cpus:<6} mems={mems}"
    if runtime.containerd is not None:
        proc = read_proc_status(runtime.containerd.pid_of(container))
        line += f"   kernel: Cpus_allowed_list={proc.cpus_allowed}"
    return line


def show(title: str, pods: DemoPods, runtime_client: CRIClient, runtime: Runtime) -> None:
    print(f"\n-- {title}")
    for container in pods.names:
        with contextlib.suppress(CRIError):
            print("   " + where(pods, runtime_client, runtime, container))


def main() -> int:
    setup_logging("warning")
    print("numa-agent demo: the agent between a kubelet-like client and the runtime\n")
    base = Path(tempfile.mkdtemp(prefix="numa-demo-"))
    try:
        with demo_runtime(base) as runtime:
            print(f"runtime: {runtime.description}")
            config = AgentConfig(
                runtime_endpoint=runtime.endpoint,
                listen=f"unix://{base / 'agent' / 'numa-agent.sock'}",
                state_dir=str(base / "state"),
                feature_file="",  # a demo publishes no node labels
            )
            daemon = Daemon(config, runtime_wait_s=10)
            daemon.start()
            try:
                print(f"agent:   serving CRI on {config.listen} (pid {os.getpid()})\n")
                if daemon.machine is not None:
                    print(render_text(daemon.machine))
                run_pods(config, runtime, daemon)
            finally:
                daemon.stop()
        print("\nstopped the agent and the runtime; all clean.")
        show_affinity_on_a_bigger_machine()
        return 0
    finally:
        shutil.rmtree(base, ignore_errors=True)


def show_affinity_on_a_bigger_machine() -> None:
    """This host is too small for affinity to choose anything: show it on a
    simulated 2-socket machine, through the same request handling as above."""
    scenario = Path(__file__).resolve().parent.parent / "examples" / "anti-affinity.yaml"
    print("\n" + "=" * 72)
    print("affinity on a 2-socket machine (numa-agent simulate examples/anti-affinity.yaml):\n")
    print(render_simulation(simulate_file(scenario)))


def run_pods(config: AgentConfig, runtime: Runtime, daemon: Daemon) -> None:
    with CRIClient(config.listen) as agent_client, CRIClient(runtime.endpoint) as runtime_client:
        pods = DemoPods(agent_client, runtime)
        try:
            pods.run("batch", QoSClass.BESTEFFORT, 0, 0)
            show("a BestEffort pod runs on the shared CPUs", pods, runtime_client, runtime)
            latency, _ = pods.run("latency", QoSClass.GUARANTEED, 1000, 64 << 20)
            show(
                "a Guaranteed 1-CPU pod gets a CPU of its own; the BestEffort one moves off it",
                pods,
                runtime_client,
                runtime,
            )
            bad = {"cri-resource-manager.intel.com/affinity": "app: [{match: {key: name}}]"}
            try:
                pods.run("misconfigured", QoSClass.BURSTABLE, 100, 0, annotations=bad)
            except CRIError as err:
                print("\n-- a pod with a bad affinity annotation is refused:")
                print(f"   {err.code.name}: {err.details}")
            pods.remove(latency)
            show(
                "the Guaranteed pod is removed; its CPU is shared again",
                pods,
                runtime_client,
                runtime,
            )
            print("\nwho runs where (the agent's view):")
            assert daemon.node is not None
            for placement in daemon.node.placements():
                who = f"{placement.namespace}/{placement.pod}/{placement.name}"
                kind = "exclusive" if placement.exclusive else "shared"
                print(
                    f"   {who:<22} pool={placement.pool:<8} cpus={placement.cpuset_cpus:<6} "
                    f"mems={placement.cpuset_mems} {kind}"
                )
        finally:
            pods.remove_all()


if __name__ == "__main__":
    logging.captureWarnings(True)
    sys.exit(main())
