"""The agent's CRI handlers end to end, in-process and over real unix sockets:
exclusive CPUs, updates to other containers, affinity, refusals, runtime failures."""

from __future__ import annotations

from typing import Any

import grpc
import pytest

from agent.affinity import ANNOTATION_AFFINITY, ANNOTATION_ANTI_AFFINITY
from agent.kubelet import (
    kubelet_container_config,
    kubelet_container_resources,
    kubelet_pod_config,
)
from agent.workload import QoSClass
from devtools.criclient import CRIClient, CRIError
from proto import cri_pb2
from tests.node.conftest import MODES, NodeFactory
from tests.waiting import wait_until
from topology.cpuset import CPUSet
from topology.tree import Machine

GI = 1 << 30


@pytest.mark.parametrize("mode", MODES)
def test_exclusive_cpus_move_others_off_and_back(make_node: NodeFactory, mode: str) -> None:
    node = make_node("desktop-1s-4c-ht", mode)
    all_cpus = str(node.machine.cpus)
    be_pod = node.pod("batch", QoSClass.BURSTABLE)
    be = node.container(be_pod, "batch", 500, 0, memory=256 << 20)
    node.settle()
    assert node.cpus(be) == all_cpus

    db_pod, g = node.guaranteed("db", 2)
    node.settle()
    exclusive = CPUSet.parse(node.cpus(g))
    assert len(exclusive) == 2
    # The running container was moved off the exclusive CPUs, with its full resources.
    assert CPUSet.parse(node.cpus(be)) == node.machine.cpus - exclusive
    sent = [r for r in node.calls("UpdateContainerResources") if r.container_id == be]
    assert sent, "no update reached the runtime for the running container"
    assert sent[-1].linux.cpu_shares == 512
    assert sent[-1].linux.memory_limit_in_bytes == 256 << 20
    assert sent[-1].linux.cpuset_mems == "0"

    by_name = {p.name: p for p in node.agent.placements()}
    assert by_name["db"].exclusive and by_name["db"].cpuset_cpus == str(exclusive)
    assert not by_name["batch"].exclusive

    node.kubelet.stop_container(g)
    node.kubelet.remove_container(g)
    node.settle()
    # Kept for a re-create (as kubelet's CPU manager keeps them) until the sandbox stops.
    assert CPUSet.parse(node.cpus(be)) == node.machine.cpus - exclusive
    node.kubelet.stop_pod_sandbox(db_pod)
    node.settle()
    assert node.cpus(be) == all_cpus
    assert [p.name for p in node.agent.placements()] == ["batch"]


@pytest.mark.parametrize("mode", MODES)
def test_affinity_pulls_to_partners_numa_node(make_node: NodeFactory, mode: str) -> None:
    node = make_node("xeon-2s-2numa", mode)
    # Fill node 0 a bit so that "closest free" alone would not pick the partner's node.
    db_pod = node.pod("db", QoSClass.BURSTABLE)
    db = node.container(db_pod, "db", 500)
    rule = (
        "app:\n- scope: {key: namespace, operator: Equals, values: [default]}\n"
        "  match: {key: name, operator: Equals, values: [db]}\n  weight: 10\n"
    )
    app_pod = node.pod("app", QoSClass.BURSTABLE, annotations={ANNOTATION_AFFINITY: rule})
    app = node.container(app_pod, "app", 500)
    node.settle()
    db_nodes = {
        n.id for n in node.machine.iter_numa_nodes() if n.cpus & CPUSet.parse(node.cpus(db))
    }
    assert len(db_nodes) == 1
    assert node.mems(app) == node.mems(db) == str(CPUSet.of(db_nodes))
    assert CPUSet.parse(node.cpus(app)) == CPUSet.parse(node.cpus(db))


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(
    "match",
    ["{key: id, operator: Equals, values: [ID]}", "{key: id, operator: Exists}"],
)
def test_a_placed_containers_id_is_its_runtime_id(
    make_node: NodeFactory, mode: str, match: str
) -> None:
    """Rules on `id` select a placed container by the id the runtime gave it (before,
    the policy kept the record made before the runtime assigned one)."""
    node = make_node("xeon-2s-2numa", mode)
    db = node.container(node.pod("db", QoSClass.BURSTABLE), "db", 500)
    rule = (
        "app:\n- scope: {key: namespace, operator: Equals, values: [default]}\n"
        f"  match: {match.replace('ID', db)}\n  weight: 10\n"
    )
    app_pod = node.pod("app", QoSClass.BURSTABLE, annotations={ANNOTATION_AFFINITY: rule})
    app = node.container(app_pod, "app", 500)
    node.settle()
    assert node.cpus(app) == node.cpus(db)
    assert next(p.score for p in node.agent.placements() if p.container_id == app) > 0


def _socket_of(node_cpus: CPUSet, machine: Machine) -> int:
    sockets = [s.id for s in machine.sockets if node_cpus.is_subset(s.cpus)]
    assert len(sockets) == 1, f"{node_cpus} spans sockets {sockets}"
    return sockets[0]


@pytest.mark.parametrize("mode", MODES)
def test_anti_affinity_pushes_replica_to_other_socket(make_node: NodeFactory, mode: str) -> None:
    node = make_node("xeon-2s-2numa", mode)
    anti = (
        "web:\n- scope: {key: pod/labels/app, operator: Equals, values: [web]}\n"
        "  match: {key: name, operator: Equals, values: [web]}\n  weight: 10\n"
    )
    cids = []
    for replica in ("web-0", "web-1"):
        sandbox = node.pod(
            replica,
            QoSClass.BURSTABLE,
            labels={"app": "web"},
            annotations={ANNOTATION_ANTI_AFFINITY: anti},
        )
        cids.append(node.container(sandbox, "web", 1000))
    node.settle()
    first, second = (CPUSet.parse(node.cpus(c)) for c in cids)
    assert _socket_of(first, node.machine) != _socket_of(second, node.machine)


@pytest.mark.parametrize("mode", MODES)
def test_bad_annotation_refused_before_the_runtime(make_node: NodeFactory, mode: str) -> None:
    node = make_node("desktop-1s-4c-ht", mode)
    bad = "app:\n- match: {key: name, operator: Sometimes, values: [db]}\n"
    sandbox = node.pod("app", QoSClass.BURSTABLE, annotations={ANNOTATION_AFFINITY: bad})
    with pytest.raises(CRIError) as err:
        node.container(sandbox, "app", 500)
    assert err.value.code == grpc.StatusCode.INVALID_ARGUMENT
    assert ANNOTATION_AFFINITY in err.value.details
    assert '"app"' in err.value.details and "Sometimes" in err.value.details
    assert node.calls("CreateContainer") == []
    assert node.agent.placements() == []


@pytest.mark.parametrize("mode", MODES)
def test_capacity_refusal_is_resource_exhausted(make_node: NodeFactory, mode: str) -> None:
    node = make_node("desktop-1s-4c-ht", mode)
    sandbox = node.pod("huge", QoSClass.GUARANTEED)
    with pytest.raises(CRIError) as err:
        node.container(sandbox, "huge", 8000, 8000)
    assert err.value.code == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert "requested 8 exclusive CPUs" in err.value.details
    assert "'huge'" in err.value.details
    assert node.calls("CreateContainer") == []


@pytest.mark.parametrize("mode", MODES)
def test_runtime_create_failure_releases_the_cpus(make_node: NodeFactory, mode: str) -> None:
    node = make_node("desktop-1s-4c-ht", mode)
    be_pod = node.pod("batch")
    be = node.container(be_pod, "batch")
    node.runtime.fail_next("CreateContainer", grpc.StatusCode.UNKNOWN, "image not unpacked")
    sandbox = node.pod("db", QoSClass.GUARANTEED)
    with pytest.raises(CRIError) as err:
        node.container(sandbox, "db", 6000, 6000)
    # The runtime's own status, unchanged.
    assert (err.value.code, err.value.details) == (grpc.StatusCode.UNKNOWN, "image not unpacked")
    node.settle()
    assert node.cpus(be) == str(node.machine.cpus)
    assert [p.name for p in node.agent.placements()] == ["batch"]
    # 6 of 8 CPUs fit only if the failed attempt gave them back.
    retry = node.container(sandbox, "db", 6000, 6000)
    node.settle()
    assert len(CPUSet.parse(node.cpus(retry))) == 6
    assert len(CPUSet.parse(node.cpus(be))) == 2


@pytest.mark.parametrize("mode", MODES)
def test_kubelet_cpuset_is_overwritten_and_the_rest_forwarded(
    make_node: NodeFactory, mode: str
) -> None:
    node = make_node("desktop-1s-4c-ht", mode)
    _, g = node.guaranteed("db", 2)
    mine = node.cpus(g)
    # kubelet's static CPU manager re-sends its own idea of the cpuset, plus a new memory limit.
    linux = kubelet_container_resources(2000, 2000, 2 * GI, cpuset_cpus="0-7")
    node.kubelet.update_container_resources(g, linux)
    sent = node.calls("UpdateContainerResources")[-1]
    assert sent.container_id == g
    assert sent.linux.cpuset_cpus == mine
    assert sent.linux.memory_limit_in_bytes == 2 * GI
    assert node.cpus(g) == mine
    assert node.linux(g).memory_limit_in_bytes == 2 * GI


@pytest.mark.parametrize("mode", MODES)
def test_unknown_container_update_forwarded_unchanged(make_node: NodeFactory, mode: str) -> None:
    node = make_node("desktop-1s-4c-ht", mode)
    sandbox = node.runtime.run_pod_sandbox(
        cri_pb2.RunPodSandboxRequest(config=cri_pb2.PodSandboxConfig())
    ).pod_sandbox_id
    cid = node.runtime.create_container(
        cri_pb2.CreateContainerRequest(
            pod_sandbox_id=sandbox,
            config=cri_pb2.ContainerConfig(metadata=cri_pb2.ContainerMetadata(name="x")),
        )
    ).container_id
    node.kubelet.update_container_resources(cid, cri_pb2.LinuxContainerResources(cpuset_cpus="3"))
    assert node.calls("UpdateContainerResources")[-1].linux.cpuset_cpus == "3"
    assert node.cpus(cid) == "3"


@pytest.mark.parametrize("mode", MODES)
def test_cpu_resize_places_again_and_updates_others(make_node: NodeFactory, mode: str) -> None:
    node = make_node("desktop-1s-4c-ht", mode)
    be = node.container(node.pod("batch"), "batch")
    _, g = node.guaranteed("db", 2)
    node.kubelet.update_container_resources(g, kubelet_container_resources(4000, 4000, GI))
    node.settle()
    grown = CPUSet.parse(node.cpus(g))
    assert len(grown) == 4
    assert CPUSet.parse(node.cpus(be)) == node.machine.cpus - grown
    assert node.linux(g).cpu_quota == 400_000


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("observe", ["list", "status"])
def test_exited_init_container_gives_its_cpus_to_the_app(
    make_node: NodeFactory, mode: str, observe: str
) -> None:
    node = make_node("desktop-1s-4c-ht", mode)
    sandbox = node.pod("web", QoSClass.GUARANTEED)
    init = node.container(sandbox, "init", 4000, 4000)
    node.runtime.exit_container(init)
    if observe == "list":
        states = {c.id: c.state for c in node.kubelet.list_containers()}
        assert states[init] == cri_pb2.CONTAINER_EXITED
    else:
        assert node.kubelet.container_status(init).status.state == cri_pb2.CONTAINER_EXITED
    assert node.agent.placements() == []
    # 4 + 4 of 8 CPUs would leave no shared CPU: only fits because init gave its 4 back.
    app = node.container(sandbox, "app", 4000, 4000)
    assert len(CPUSet.parse(node.cpus(app))) == 4


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("remove", [False, True])
def test_pod_sandbox_stop_releases_its_containers(
    make_node: NodeFactory, mode: str, remove: bool
) -> None:
    node = make_node("desktop-1s-4c-ht", mode)
    be = node.container(node.pod("batch"), "batch")
    sandbox, _ = node.guaranteed("db", 3)
    node.settle()
    assert len(CPUSet.parse(node.cpus(be))) == 5
    node.kubelet.stop_pod_sandbox(sandbox)
    if remove:
        node.kubelet.remove_pod_sandbox(sandbox)
    node.settle()
    assert node.cpus(be) == str(node.machine.cpus)
    assert [p.name for p in node.agent.placements()] == ["batch"]


def test_rewritten_create_keeps_fields_the_agent_does_not_declare(make_node: NodeFactory) -> None:
    from agent.kubelet import kubelet_container_config
    from agent.node.agent import CREATE_CONTAINER
    from agent.runtime.inprocess import in_process_forward

    node = make_node("desktop-1s-4c-ht", "inprocess")
    sandbox = node.pod("db", QoSClass.GUARANTEED)
    config = kubelet_container_config(node.pods[sandbox], "db", 2000, 2000)
    request = cri_pb2.CreateContainerRequest(
        pod_sandbox_id=sandbox, config=config, sandbox_config=node.pods[sandbox]
    ).SerializeToString()
    # Field 99 (varint 7) at the top level: a field of a future CRI version.
    future = bytes([99 << 3 & 0x7F | 0x80, 99 >> 4, 7])
    seen: list[bytes] = []
    forward = in_process_forward(node.runtime, CREATE_CONTAINER)

    def capture(body: bytes) -> bytes:
        seen.append(body)
        return forward(body)

    node.agent.handlers()[CREATE_CONTAINER](request + future, capture)
    sent = cri_pb2.CreateContainerRequest.FromString(seen[0])
    assert sent.config.linux.resources.cpuset_cpus  # the agent did rewrite it
    assert future in seen[0]


@pytest.mark.parametrize("mode", MODES)
def test_a_partial_update_keeps_the_container_exclusive(make_node: NodeFactory, mode: str) -> None:
    """`crictl update --memory 128M` sends only memory_limit_in_bytes: the fields left at
    zero mean "unchanged", as for the runtime, not a request of 0 CPU."""
    node = make_node("desktop-1s-4c-ht", mode)
    _, db = node.guaranteed("db", 2)
    node.settle()
    own = node.cpus(db)
    node.kubelet.update_container_resources(
        db, cri_pb2.LinuxContainerResources(memory_limit_in_bytes=128 << 20)
    )
    node.settle()
    placed = {p.container_id: p for p in node.agent.placements()}
    assert placed[db].exclusive and node.cpus(db) == own
    linux = node.linux(db)
    assert (linux.memory_limit_in_bytes, linux.cpu_quota, linux.cpu_shares) == (
        128 << 20,
        200_000,
        2048,
    )
    # The next Guaranteed container does not get db's CPUs.
    _, other = node.guaranteed("other", 2)
    node.settle()
    assert CPUSet.parse(node.cpus(other)).isdisjoint(CPUSet.parse(own))


def test_a_create_that_times_out_keeps_its_cpus_until_the_runtime_answers(
    make_node: NodeFactory,
) -> None:
    """kubelet's deadline passes while the runtime is still creating the container; the
    runtime then finishes it with the cpuset the agent wrote. Its CPUs must stay taken
    (the next Guaranteed container gets others), and a relist tracks it."""
    node = make_node("desktop-1s-4c-ht", "grpc")
    assert isinstance(node.kubelet, CRIClient)
    gate = node.runtime.hold_next("CreateContainer")
    sandbox = node.pod("db", QoSClass.GUARANTEED)
    node.kubelet.timeout = 0.5
    with pytest.raises(CRIError) as late:
        node.container(sandbox, "db", 2000, 2000, memory=GI, start=False)
    assert late.value.code == grpc.StatusCode.DEADLINE_EXCEEDED
    node.kubelet.timeout = 5
    assert gate.entered.is_set()
    gate.release.set()

    # The runtime finishes the create on its own: a container kubelet never heard of.
    def created() -> list[Any]:
        return list(node.runtime.list_containers(cri_pb2.ListContainersRequest()).containers)

    wait_until(created, what="the runtime to finish the held create")
    (made,) = created()
    db = made.id
    held = CPUSet.parse(node.cpus(db))
    assert len(held) == 2
    _, other = node.guaranteed("other", 1)
    assert CPUSet.parse(node.cpus(other)).isdisjoint(held)
    # kubelet's relist (through the agent) shows it: the agent tracks it where it runs.
    node.kubelet.list_containers()
    placed = {p.container_id: p for p in node.agent.placements()}
    assert db in placed and placed[db].exclusive and CPUSet.parse(placed[db].cpuset_cpus) == held


def test_a_retried_create_reuses_the_cpus_of_the_one_that_gave_no_answer(
    make_node: NodeFactory,
) -> None:
    node = make_node("desktop-1s-4c-ht", "grpc")
    assert isinstance(node.kubelet, CRIClient)
    node.runtime.fail_next("CreateContainer", grpc.StatusCode.DEADLINE_EXCEEDED, "slow disk")
    sandbox = node.pod("db", QoSClass.GUARANTEED)
    with pytest.raises(CRIError):
        node.container(sandbox, "db", 2000, 2000, memory=GI, start=False)
    reserved = {p.pool for p in node.agent.placements()}
    assert reserved == set()  # not a container yet, but its CPUs are held:
    _, other = node.guaranteed("other", 1)
    # kubelet retries the same container: it gets the CPUs the first attempt was given.
    db = node.container(sandbox, "db", 2000, 2000, memory=GI)
    assert CPUSet.parse(node.cpus(db)).isdisjoint(CPUSet.parse(node.cpus(other)))
    first = node.calls("CreateContainer")[0].config.linux.resources.cpuset_cpus
    assert node.cpus(db) == first


def test_a_container_created_behind_the_agents_back_is_adopted_on_a_relist(
    make_node: NodeFactory,
) -> None:
    node = make_node("desktop-1s-4c-ht", "inprocess")
    batch = node.container(node.pod("batch"), "batch")
    # Straight at the runtime: a Guaranteed container on CPUs 1 and 5 (core 1).
    pod = kubelet_pod_config("sneaky", "default", "uid-sneaky", qos=QoSClass.GUARANTEED)
    sandbox = node.runtime.run_pod_sandbox(cri_pb2.RunPodSandboxRequest(config=pod)).pod_sandbox_id
    config = kubelet_container_config(pod, "sneaky", 2000, 2000, GI, cpuset_cpus="1,5")
    sneaky = node.runtime.create_container(
        cri_pb2.CreateContainerRequest(pod_sandbox_id=sandbox, config=config, sandbox_config=pod)
    ).container_id
    node.kubelet.list_containers()
    placed = {p.container_id: p for p in node.agent.placements()}
    assert placed[sneaky].exclusive and placed[sneaky].cpuset_cpus == "1,5"
    assert CPUSet.parse(node.cpus(batch)).isdisjoint(CPUSet.parse("1,5"))
    _, other = node.guaranteed("other", 2)
    assert CPUSet.parse(node.cpus(other)).isdisjoint(CPUSet.parse("1,5"))


def test_a_create_that_gave_no_answer_and_made_nothing_frees_its_cpus(
    make_node: NodeFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    node = make_node("desktop-1s-4c-ht", "inprocess")
    node.runtime.fail_next("CreateContainer", grpc.StatusCode.CANCELLED, "kubelet went away")
    sandbox = node.pod("db", QoSClass.GUARANTEED)
    with pytest.raises(CRIError):
        node.container(sandbox, "db", 2000, 2000, memory=GI, start=False)
    held = node.agent.capacity()[0].exclusive
    assert len(held) == 2
    node.kubelet.list_containers()  # within the grace period: still held
    assert node.agent.capacity()[0].exclusive == held
    monkeypatch.setattr("agent.node.relist.CREATE_GRACE_S", 0.0)
    node.kubelet.list_containers()  # a complete listing without it, after the grace period
    assert not node.agent.capacity()[0].exclusive
