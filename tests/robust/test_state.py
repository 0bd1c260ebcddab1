"""The state file across restarts: unusable files are moved aside and the agent
rebuilds from the runtime without ever crash-looping; a changed topology keeps
every placement that is still valid and places the others again."""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Callable
from pathlib import Path

import pytest

from agent.kubelet import kubelet_container_config, kubelet_pod_config
from agent.node.agent import NodeAgent
from agent.node.fingerprint import machine_fingerprint
from agent.node.runtime_access import InProcessRuntimeAccess
from agent.policy.config import PolicyConfig
from agent.runtime.memory import MemoryRuntime
from agent.state import SCHEMA_VERSION, StateStore
from agent.state.journal import saved_payload
from agent.workload import QoSClass
from devtools.fakesysfs import write_sysfs
from tests.node.conftest import InProcessKubelet
from tests.robust.harness import RuntimeServer, Site, books_problems, create, live, run_pod
from tests.waiting import LIMIT_S
from topology.cpuset import CPUSet
from topology.shapes import SHAPES
from topology.sysfs import read_machine


def _truncate(path: Path) -> None:
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 3])


def _flip_a_cpu(path: Path) -> None:
    doc = json.loads(path.read_text())
    for entry in doc["payload"]["containers"].values():
        entry["exclusive_cpus"] = "1-7"  # a bit flip on disk: the checksum no longer matches
    path.write_text(json.dumps(doc))


def _future_schema(path: Path) -> None:
    doc = json.loads(path.read_text())
    doc["schema"] = SCHEMA_VERSION + 7
    path.write_text(json.dumps(doc))


def _other_machine(path: Path) -> None:
    doc = json.loads(path.read_text())
    doc["machine"] = "0" * 64
    path.write_text(json.dumps(doc))


CORRUPTIONS: list[tuple[str, Callable[[Path], None], str]] = [
    ("truncated", _truncate, "not valid JSON"),
    ("checksum", _flip_a_cpu, "checksum mismatch"),
    ("schema", _future_schema, f"unknown schema version {SCHEMA_VERSION + 7}"),
    ("machine", _other_machine, "different machine topology"),
]


def test_unusable_state_files_never_stop_the_agent(
    site: Site, runtime_server: RuntimeServer
) -> None:
    agent = site.start(runtime_server.endpoint)
    with agent.client() as client:
        sandbox, pod = run_pod(client, "db")
        db = create(client, sandbox, pod, "db", 2)
        be_sandbox, be_pod = run_pod(client, "batch")
        batch = create(client, be_sandbox, be_pod, "batch", 0)
    assert agent.stop()[0] == 0
    good = agent.state_file.read_bytes()
    before = live(runtime_server.runtime)
    assert len(before[db]) == 2 and before[db].isdisjoint(before[batch])

    for number, (kind, corrupt, reason) in enumerate(CORRUPTIONS, start=1):
        agent.state_file.write_bytes(good)
        corrupt(agent.state_file)
        agent = site.start(runtime_server.endpoint)  # READY=1, or the harness fails
        with agent.client() as client:
            assert client.version().runtime_name, kind
        code, stderr = agent.stop()
        assert code == 0, (kind, stderr)
        warning = next(line for line in stderr.splitlines() if "is unusable" in line)
        assert reason in warning and "moved it to" in warning, (kind, warning)
        aside = sorted(site.state_dir.glob("state.json.rejected-*"))
        assert len(aside) == number, (kind, aside)  # each kept, none overwritten
        assert all(re.search(r"rejected-\d{8}T\d{6}Z(\.\d+)?$", p.name) for p in aside)
        # Rebuilt from the runtime: the same containers on the same CPUs.
        assert live(runtime_server.runtime) == before, kind
        assert books_problems(runtime_server.runtime, agent.state()) == [], kind
        assert agent.state()["containers"][db]["exclusive_cpus"], kind


# ----------------------------------------------------------------------------- topology


def _agent(machine_root: Path, runtime: MemoryRuntime, state: Path, reserved: str) -> NodeAgent:
    machine = read_machine(machine_root, cpu_info=False)
    store = StateStore(state, machine_fingerprint(machine))
    agent = NodeAgent(
        machine,
        PolicyConfig.from_mapping({"reserved_cpus": reserved}),
        InProcessRuntimeAccess(runtime),
        store=store,
    )
    agent.start()
    return agent


@pytest.mark.parametrize("change", ["cpus-offline", "reserved-cpus"])
def test_topology_change_keeps_valid_placements_and_moves_the_rest(
    tmp_path: Path, change: str
) -> None:
    spec = SHAPES["desktop-1s-4c-ht"]  # CPUs 0-7, core c = CPUs c and c+4
    full = write_sysfs(spec, tmp_path / "full")
    runtime = MemoryRuntime()
    state = tmp_path / "state"
    first = _agent(full, runtime, state, "0")
    kubelet = InProcessKubelet(first, runtime)
    cids = {}
    for name, cpus in (("keep", 2), ("lose", 2), ("batch", 0)):
        qos = QoSClass.GUARANTEED if cpus else QoSClass.BESTEFFORT
        pod = kubelet_pod_config(name, "default", f"uid-{name}", qos=qos)
        sandbox = kubelet.run_pod_sandbox(pod)
        config = kubelet_container_config(
            pod, name, cpus * 1000, cpus * 1000, (1 << 30) if cpus else 0
        )
        cids[name] = kubelet.create_container(sandbox, config, pod)
        kubelet.start_container(cids[name])
    first.close()
    was = live(runtime)
    keep, lose = was[cids["keep"]], was[cids["lose"]]
    assert len(keep) == len(lose) == 2 and keep.isdisjoint(lose)

    if change == "cpus-offline":
        # The CPUs of "lose" go offline; the fingerprint changes, so the state file is
        # moved aside and the runtime's view is all the agent has.
        root = write_sysfs(dataclasses.replace(spec, offline=lose), tmp_path / "offline")
        reserved = "0"
        gone = lose
    else:
        root, reserved, gone = full, f"0,{lose.first()}", CPUSet.of([lose.first()])
    second = _agent(root, runtime, state, reserved)
    try:
        assert second.wait_for_updates(LIMIT_S)
        now = live(runtime)
        assert now[cids["keep"]] == keep, "a container whose CPUs are still valid was moved"
        moved = now[cids["lose"]]
        assert len(moved) == 2 and moved.isdisjoint(gone) and moved.isdisjoint(keep)
        assert CPUSet.parse(reserved).isdisjoint(moved | now[cids["batch"]])
        assert now[cids["batch"]].isdisjoint(keep | moved | gone)
        placed = {p.container_id: p for p in second.placements()}
        assert placed[cids["lose"]].exclusive and placed[cids["keep"]].exclusive
        state_payload = saved_payload(state)
        assert books_problems(runtime, state_payload) == []
    finally:
        second.close()


def _run(kubelet: InProcessKubelet, name: str, qos: QoSClass, milli: int, mem: int) -> str:
    pod = kubelet_pod_config(name, "default", f"uid-{name}", qos=qos)
    sandbox = kubelet.run_pod_sandbox(pod)
    limit = milli if qos is not QoSClass.BESTEFFORT else 0
    cid = kubelet.create_container(
        sandbox, kubelet_container_config(pod, name, milli, limit, mem), pod
    )
    kubelet.start_container(cid)
    return cid


@pytest.mark.parametrize("memory_gib", [20, 12])
def test_a_memory_size_change_keeps_the_state_and_every_class(
    tmp_path: Path, memory_gib: int
) -> None:
    """A VM's memory grows or shrinks between two runs (ballooning, hotplug): the
    state file still holds, so a Burstable container with CPU request = limit = 1
    stays shared, nobody moves, and the next Guaranteed pod gets its CPU."""
    spec = SHAPES["desktop-1s-4c-ht"]
    runtime = MemoryRuntime()
    state = tmp_path / "state"
    first = _agent(write_sysfs(spec, tmp_path / "before"), runtime, state, "0")
    kubelet = InProcessKubelet(first, runtime)
    burstable = _run(kubelet, "burst", QoSClass.BURSTABLE, 1000, 1 << 30)
    batch = _run(kubelet, "batch", QoSClass.BESTEFFORT, 0, 0)
    first.close()
    was = live(runtime)
    grown = dataclasses.replace(spec, memory_per_numa=memory_gib << 30)
    second = _agent(write_sysfs(grown, tmp_path / "after"), runtime, state, "0")
    try:
        assert second.machine.numa_node(0).memory_bytes == memory_gib << 30  # re-read
        assert not list(state.glob("state.json.rejected-*")), "the state file was moved aside"
        assert second.wait_for_updates(5.0)
        assert live(runtime) == was
        placed = {p.container_id: p for p in second.placements()}
        assert not placed[burstable].exclusive and not placed[batch].exclusive
        kubelet = InProcessKubelet(second, runtime)
        db = _run(kubelet, "db", QoSClass.GUARANTEED, 6000, 1 << 30)
        assert len(live(runtime)[db]) == 6  # every CPU but the reserved one and one shared
    finally:
        second.close()


def test_a_state_file_with_the_previous_fingerprint_is_read(tmp_path: Path) -> None:
    """State files of earlier versions carry the whole-topology fingerprint."""
    from agent.node.fingerprint import legacy_fingerprint

    machine_root = write_sysfs(SHAPES["desktop-1s-4c-ht"], tmp_path / "m")
    machine = read_machine(machine_root, cpu_info=False)
    old = StateStore(tmp_path / "state", legacy_fingerprint(machine))
    old.save({"version": 2, "pods": {}, "containers": {}})
    new = StateStore(
        tmp_path / "state",
        machine_fingerprint(machine),
        also_accept=(legacy_fingerprint(machine),),
    )
    assert new.load().payload is not None
    assert StateStore(tmp_path / "state", machine_fingerprint(machine)).load().payload is None


def test_without_a_usable_state_each_pods_class_comes_from_its_cgroup_parent(
    tmp_path: Path,
) -> None:
    """The state file is lost: adoption learns each pod's QoS class from the cgroup
    parent PodSandboxStatus reports, never from one container's numbers. A Burstable
    pod whose first container has CPU request = limit = 1 stays shared, its sidecar
    and a BestEffort pod stay where they run, and the next Guaranteed pod fits."""
    spec = SHAPES["desktop-1s-4c-ht"]
    root = write_sysfs(spec, tmp_path / "m")
    runtime = MemoryRuntime()
    state = tmp_path / "state"
    first = _agent(root, runtime, state, "0")
    kubelet = InProcessKubelet(first, runtime)
    pod = kubelet_pod_config("web", "default", "uid-web", qos=QoSClass.BURSTABLE)
    sandbox = kubelet.run_pod_sandbox(pod)
    app = kubelet.create_container(
        sandbox, kubelet_container_config(pod, "app", 1000, 1000, 1 << 30), pod
    )
    sidecar = kubelet.create_container(
        sandbox, kubelet_container_config(pod, "sidecar", 100, 0, 0), pod
    )
    for cid in (app, sidecar):
        kubelet.start_container(cid)
    batch = _run(kubelet, "batch", QoSClass.BESTEFFORT, 0, 0)
    first.close()
    was = live(runtime)
    for leftover in state.iterdir():
        leftover.unlink()  # the state is gone (a new disk, a wiped directory)
    second = _agent(root, runtime, state, "0")
    try:
        assert second.wait_for_updates(5.0)
        assert live(runtime) == was, "a container was moved"
        placed = {p.container_id: p for p in second.placements()}
        assert not any(placed[c].exclusive for c in (app, sidecar, batch))
        kubelet = InProcessKubelet(second, runtime)
        db = _run(kubelet, "db", QoSClass.GUARANTEED, 5000, 1 << 30)  # 2 left for 1100m
        assert len(live(runtime)[db]) == 5
    finally:
        second.close()
