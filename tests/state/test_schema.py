"""The state payload: what is saved round-trips, a bad payload names its path and is
moved aside, and a version 1 file (numa-agent 0.1's) is upgraded with every placement."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from google.protobuf import json_format

from agent.kubelet import kubelet_container_config, kubelet_pod_config
from agent.node.agent import NodeAgent
from agent.node.fingerprint import legacy_fingerprint, machine_fingerprint
from agent.node.runtime_access import InProcessRuntimeAccess
from agent.policy.config import PolicyConfig
from agent.runtime.memory import MemoryRuntime
from agent.state import schema
from agent.state.journal import saved_payload
from agent.state.store import StateStore
from agent.workload import QoSClass
from proto import cri_pb2
from tests.node.conftest import InProcessKubelet, NodeFactory
from topology.cpuset import CPUSet
from topology.tree import Machine

DATA = Path(__file__).parent / "data"
# Written by numa-agent 0.1 (commit 6d65e9e) on xeon-2s-2numa: db exclusive on NUMA
# node 0 (CPUs 0-9,40-49), api pulled towards it into socket0, batch in numa1.
V1_FILE = DATA / "state-v1-xeon-2s-2numa.json"


def busy_node(make_node: NodeFactory, state_dir: Path) -> Any:
    node = make_node("xeon-2s-2numa", "inprocess", state_dir=state_dir)
    node.guaranteed("db", 4)
    web = node.pod(
        "web",
        QoSClass.BURSTABLE,
        annotations={
            "cri-resource-manager.intel.com/affinity": "main: [db]",
            "kubectl.kubernetes.io/last-applied-configuration": "{" + "x" * 5000 + "}",
        },
        labels={"app": "web"},
    )
    node.container(web, "main", 500)
    return node


def test_round_trip(make_node: NodeFactory, tmp_path: Path) -> None:
    node = busy_node(make_node, tmp_path)
    payload = saved_payload(tmp_path)
    saved = schema.decode(payload)
    records = node.agent._books.policy.records()
    assert set(saved.containers) == set(records)
    for cid, entry in saved.containers.items():
        record = records[cid]
        assert entry.info == record.request.container
        assert entry.resources == record.request.resources
        assert entry.placement == record.saved()
        assert entry.sent == node.agent._books.sent[cid]
    # Only the annotations the agent reads are kept.
    for pod in saved.pods.values():
        assert "kubectl.kubernetes.io/last-applied-configuration" not in pod.annotations


def _mutations() -> list[tuple[str, Callable[[dict[str, Any]], None], str]]:
    def first(p: dict[str, Any]) -> dict[str, Any]:
        return next(iter(p["containers"].values()))  # type: ignore[no-any-return]

    def set_in(path: str, value: Any) -> Callable[[dict[str, Any]], None]:
        def apply(p: dict[str, Any]) -> None:
            first(p)[path] = value

        return apply

    return [
        (
            "pool not a string",
            set_in("pool", 3),
            r"Expected `str`, got `int` - at `containers\[\.\.\.\]\.pool`",
        ),
        ("score not a number", set_in("score", "high"), r"containers\[\.\.\.\]\.score"),
        ("unknown field", set_in("colour", "red"), r"unknown field `colour`"),
        ("bad cpuset", set_in("exclusive_cpus", "3-1"), r"exclusive_cpus"),
        ("unknown sandbox", set_in("sandbox", "nope"), r"sandbox: no pod 'nope'"),
        ("bad qos", set_in("qosclass", "Gold"), r"Invalid enum value 'Gold'"),
        ("labels not strings", set_in("labels", {"a": 1}), r"labels"),
        ("sent not resources", set_in("sent", {"cpu_shares": "many"}), r"\.sent"),
        ("version", lambda p: p.update(version=9), r"version 9"),
        ("containers a list", lambda p: p.update(containers=[]), r"containers"),
        (
            "empty container id",
            lambda p: p["containers"].update({"": first(p)}),
            r"a container id must not be empty",
        ),
    ]


@pytest.mark.parametrize(
    ("what", "mutate", "names"), _mutations(), ids=[m[0] for m in _mutations()]
)
def test_bad_payloads_name_the_path(
    make_node: NodeFactory,
    tmp_path: Path,
    what: str,
    mutate: Callable[[dict[str, Any]], None],
    names: str,
) -> None:
    busy_node(make_node, tmp_path)
    payload = saved_payload(tmp_path)
    bad = copy.deepcopy(payload)
    mutate(bad)
    with pytest.raises(schema.StateFormatError, match=names):
        schema.decode(bad)


def _rewrite(path: Path, mutate: Callable[[dict[str, Any]], None]) -> None:
    """Change the payload and write a valid checksum for it: only the schema can object."""
    store = StateStore(path.parent, json.loads(path.read_text())["machine"])
    doc = json.loads(path.read_text())
    mutate(doc["payload"])
    store.save(doc["payload"])


def test_a_checksummed_file_with_wrong_types_is_moved_aside_not_overwritten(
    make_node: NodeFactory, tmp_path: Path
) -> None:
    first = busy_node(make_node, tmp_path)
    first.agent.close()
    state = tmp_path / "state.json"
    _rewrite(state, lambda p: next(iter(p["containers"].values())).update(pool=7))
    bad = state.read_bytes()
    second = make_node("xeon-2s-2numa", "inprocess", runtime=first.runtime, state_dir=tmp_path)
    aside = list(tmp_path.glob("state.json.rejected-*"))
    assert [p.read_bytes() for p in aside] == [bad]
    # Everything still runs where it ran: adopted from the runtime.
    assert {p.container_id for p in second.agent.placements()} == {
        p.container_id for p in first.agent.placements()
    }


def _replay_v1_runtime(runtime: MemoryRuntime) -> dict[str, str]:
    """The runtime as it was when V1_FILE was written: the same calls in the same
    order give the same (deterministic) ids, with the cpusets the file records."""
    doc = json.loads(V1_FILE.read_text())["payload"]
    by_pod = {c["info"]["pod"]["name"]: (cid, c) for cid, c in doc["containers"].items()}
    ids = {}
    for name, qos in (
        ("db", QoSClass.GUARANTEED),
        ("api", QoSClass.BURSTABLE),
        ("batch", QoSClass.BESTEFFORT),
    ):
        cid, saved = by_pod[name]
        pod = kubelet_pod_config(name, "default", f"uid-{name}", {"app": name}, {}, qos)
        sandbox = runtime.run_pod_sandbox(cri_pb2.RunPodSandboxRequest(config=pod)).pod_sandbox_id
        assert sandbox == saved["info"]["pod"]["id"]
        config = kubelet_container_config(pod, "main")
        config.linux.resources.Clear()
        json_format.ParseDict(saved["resources"], config.linux.resources)
        made = runtime.create_container(
            cri_pb2.CreateContainerRequest(
                pod_sandbox_id=sandbox, config=config, sandbox_config=pod
            )
        ).container_id
        assert made == cid
        runtime.start_container(cri_pb2.StartContainerRequest(container_id=made))
        ids[name] = made
    return ids


def test_a_version_1_state_file_keeps_every_placement(
    machines: Callable[[str], Machine], tmp_path: Path
) -> None:
    machine = machines("xeon-2s-2numa")
    (tmp_path / "state.json").write_bytes(V1_FILE.read_bytes())
    runtime = MemoryRuntime()
    ids = _replay_v1_runtime(runtime)
    # The file carries the fingerprint of its time (the whole topology): still read.
    store = StateStore(
        tmp_path, machine_fingerprint(machine), also_accept=(legacy_fingerprint(machine),)
    )
    agent = NodeAgent(machine, PolicyConfig(), InProcessRuntimeAccess(runtime), store=store)
    agent.start()
    try:
        assert not list(tmp_path.glob("state.json.rejected-*"))
        placed = {p.pod: p for p in agent.placements()}
        node0 = machine.numa_node(0).cpus
        assert placed["db"].exclusive and CPUSet.parse(placed["db"].cpuset_cpus) == node0
        # api keeps socket0 (not numa1, which its cpuset alone would suggest) ...
        assert placed["api"].pool == "socket0"
        assert placed["batch"].pool == "numa1"
        # ... so it widens back to all of socket 0 when db goes.
        # (Its place is kept for a re-create until its sandbox stops.)
        listed = runtime.list_containers(cri_pb2.ListContainersRequest()).containers
        (db_sandbox,) = [c.pod_sandbox_id for c in listed if c.id == ids["db"]]
        kubelet = InProcessKubelet(agent, runtime)
        kubelet.remove_container(ids["db"])
        kubelet.stop_pod_sandbox(db_sandbox)
        placed = {p.pod: p for p in agent.placements()}
        assert CPUSet.parse(placed["api"].cpuset_cpus) == machine.sockets[0].cpus
        # The file is version 2 from now on.
        assert json.loads((tmp_path / "state.json").read_text())["payload"]["version"] == 2
    finally:
        agent.close()
