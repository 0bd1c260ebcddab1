"""A pod's place holds for its whole life (issue 21), through the agent's CRI handlers
as kubelet drives them: the pod rules are decided once per pod, a pod occupies its
domains until its sandbox stops, a re-created container gets its place back, a
resize never re-checks the pod rules, and no tenant can close the node."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import grpc
import pytest

from agent.kubelet import kubelet_container_resources
from agent.workload import QoSClass
from devtools.criclient import CRIError
from proto import cri_pb2
from tests.node.conftest import MODES, Node, NodeFactory
from topology.cpuset import CPUSet

APART = """
podAntiAffinity:
  requiredDuringSchedulingIgnoredDuringExecution:
  - labelSelector: {matchLabels: {app: db}}
    topologyKey: numa-agent.io/socket
"""
NEAR_CACHE = """
podAffinity:
  requiredDuringSchedulingIgnoredDuringExecution:
  - labelSelector: {matchLabels: {app: cache}}
    topologyKey: numa-agent.io/numa
"""
DB = {"numa-agent.io/affinity": APART}


def sockets(node: Node, cpus: str) -> set[int]:
    mask = CPUSet.parse(cpus)
    return {s.id for s in node.machine.sockets if not s.cpus.isdisjoint(mask)}


def nodes(node: Node, cpus: str) -> set[int]:
    mask = CPUSet.parse(cpus)
    return {n.id for n in node.machine.iter_numa_nodes() if not n.cpus.isdisjoint(mask)}


def replica(
    node: Node, name: str, annotations: Mapping[str, str] = DB, cpus: int = 2
) -> tuple[str, str]:
    return node.guaranteed(name, cpus, annotations=annotations, labels={"app": "db"})


def exit_and_relist(node: Node, cid: str) -> None:
    node.runtime.exit_container(cid)
    node.kubelet.list_containers()


@pytest.mark.parametrize("mode", MODES)
def test_a_crash_never_locks_a_replica_out(make_node: NodeFactory, mode: str) -> None:
    """db-0 crashes; the pending db-2 is tried while kubelet backs off and is refused
    (db-0 still occupies its socket); db-0's re-create gets its very CPUs back."""
    node = make_node("xeon-2s-2numa", mode)
    sandbox, db0 = replica(node, "db-0")
    _, db1 = replica(node, "db-1")
    before = node.cpus(db0)
    exit_and_relist(node, db0)
    with pytest.raises(CRIError) as refused:
        replica(node, "db-2")
    assert refused.value.code == grpc.StatusCode.FAILED_PRECONDITION
    again = node.container(sandbox, "db-0", 2000, 2000, memory=1 << 30, attempt=1)
    assert node.cpus(again) == before
    assert sockets(node, node.cpus(again)).isdisjoint(sockets(node, node.cpus(db1)))
    # kubelet's garbage collection removes the old one later: nothing changes.
    node.kubelet.remove_container(db0)
    assert node.cpus(again) == before
    assert [p.container_id for p in node.agent.placements()].count(again) == 1


def test_a_restart_keeps_an_exited_containers_place(make_node: NodeFactory, tmp_path: Path) -> None:
    """An agent restart between the crash and the re-create changes nothing."""
    node = make_node("xeon-2s-2numa", "inprocess", state_dir=tmp_path)
    sandbox, db0 = replica(node, "db-0")
    replica(node, "db-1")
    before = node.cpus(db0)
    exit_and_relist(node, db0)
    node.agent.close()
    second = make_node("xeon-2s-2numa", "inprocess", runtime=node.runtime, state_dir=tmp_path)
    second.pods.update(node.pods)
    with pytest.raises(CRIError):
        replica(second, "db-2")
    again = second.container(sandbox, "db-0", 2000, 2000, memory=1 << 30, attempt=1)
    assert second.cpus(again) == before


def test_a_sandbox_stopped_while_the_agent_was_down_keeps_no_place(
    make_node: NodeFactory, tmp_path: Path
) -> None:
    """A pod's places last until its sandbox stops, also when the agent missed the
    StopPodSandbox (it died between the runtime's stop and its own record): at the
    restart the exited container of a stopped sandbox holds nothing."""
    node = make_node("xeon-2s-2numa", "inprocess", state_dir=tmp_path)
    sandbox, db0 = replica(node, "db-0")
    replica(node, "db-1")
    exit_and_relist(node, db0)
    node.agent.close()
    node.runtime.stop_pod_sandbox(cri_pb2.StopPodSandboxRequest(pod_sandbox_id=sandbox))
    second = make_node("xeon-2s-2numa", "inprocess", runtime=node.runtime, state_dir=tmp_path)
    second.pods.update(node.pods)
    assert db0 not in {p.container_id for p in second.agent.placements()}
    replica(second, "db-2")  # db-0's socket is free again


def test_an_init_container_gives_its_cpus_to_the_pods_next_container(
    make_node: NodeFactory,
) -> None:
    node = make_node("desktop-1s-4c-ht", "inprocess")
    sandbox = node.pod("web", QoSClass.GUARANTEED, annotations=DB, labels={"app": "db"})
    init = node.container(sandbox, "init", 4000, 4000)
    exit_and_relist(node, init)
    # 4 + 4 of 8 CPUs leave no shared CPU: fits only because init gave its 4 back.
    app = node.container(sandbox, "app", 4000, 4000)
    assert len(CPUSet.parse(node.cpus(app))) == 4


def test_a_pod_whose_affinity_target_left_restarts_and_resizes(make_node: NodeFactory) -> None:
    node = make_node("xeon-2s-2numa", "inprocess")
    cache_pod, cache = node.guaranteed("cache", 2, labels={"app": "cache"})
    near = nodes(node, node.cpus(cache))
    sandbox = node.pod(
        "web", QoSClass.BURSTABLE, annotations={"numa-agent.io/affinity": NEAR_CACHE}
    )
    web = node.container(sandbox, "web", 500, 1000)
    assert nodes(node, node.cpus(web)) == near
    node.kubelet.stop_container(cache)
    node.kubelet.stop_pod_sandbox(cache_pod)
    exit_and_relist(node, web)
    again = node.container(sandbox, "web", 500, 1000, attempt=1)
    node.kubelet.update_container_resources(again, kubelet_container_resources(600, 1000))
    node.settle()
    assert nodes(node, node.cpus(again)) == near
    # A size the pod's NUMA node cannot hold is refused, saying so; it stays.
    with pytest.raises(CRIError) as refused:
        node.kubelet.update_container_resources(again, kubelet_container_resources(30_000, 0))
    assert refused.value.code == grpc.StatusCode.FAILED_PRECONDITION
    assert "the pod's place" in refused.value.details
    assert nodes(node, node.cpus(again)) == near


SHIPPER_AWAY = "shipper: [{match: {key: name, operator: Equals, values: [database]}, weight: 100}]"


def test_one_pod_one_place_whatever_its_own_containers_prefer(make_node: NodeFactory) -> None:
    """A cri-resource-manager anti-affinity between a pod's own two containers would
    push the shipper to the other socket; the pod rule keeps it in the pod's socket,
    and the sibling replica still fits."""
    node = make_node("xeon-2s-2numa", "inprocess")
    annotations = {**DB, "cri-resource-manager.intel.com/anti-affinity": SHIPPER_AWAY}
    placed = []
    for n in range(2):
        sandbox = node.pod(
            f"db-{n}", QoSClass.GUARANTEED, annotations=annotations, labels={"app": "db"}
        )
        database = node.container(sandbox, "database", 2000, 2000, memory=1 << 30)
        shipper = node.container(sandbox, "shipper", 1000, 1000, memory=1 << 30)
        here = sockets(node, node.cpus(database))
        assert sockets(node, node.cpus(shipper)) == here
        placed.append(here)
    assert placed[0].isdisjoint(placed[1])


@pytest.mark.parametrize(
    "term",
    [
        "{labelSelector: {matchExpressions: [{key: app, operator: NotIn, values: [zz]}]}, "
        "namespaceSelector: {}, topologyKey: kubernetes.io/hostname}",
        "{labelSelector: {matchExpressions: [{key: zz, operator: DoesNotExist}]}, "
        "namespaceSelector: {}, topologyKey: numa-agent.io/socket}",
        "{labelSelector: {}, namespaces: [other], topologyKey: numa-agent.io/numa}",
        "{labelSelector: {}, namespaceSelector: {}, topologyKey: numa-agent.io/core}",
    ],
)
def test_no_tenant_can_close_the_node(make_node: NodeFactory, term: str) -> None:
    node = make_node("xeon-2s-2numa", "inprocess")
    rule = f"podAntiAffinity:\n  requiredDuringSchedulingIgnoredDuringExecution:\n  - {term}\n"
    sandbox = node.pod("greedy", QoSClass.BURSTABLE, annotations={"numa-agent.io/affinity": rule})
    with pytest.raises(CRIError) as refused:
        node.container(sandbox, "main", 100, 0)
    assert refused.value.code == grpc.StatusCode.INVALID_ARGUMENT
    assert "podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution[0]" in (
        refused.value.details
    )
    # Everyone else still runs, in every namespace.
    other = node.pod("web", QoSClass.BURSTABLE, namespace="shop")
    assert node.container(other, "main", 100, 0)


def test_a_shared_container_may_not_hold_a_required_anti_affinity_at_core(
    make_node: NodeFactory,
) -> None:
    node = make_node("xeon-2s-2numa", "inprocess")
    rule = (
        "podAntiAffinity:\n  requiredDuringSchedulingIgnoredDuringExecution:\n"
        "  - {labelSelector: {}, topologyKey: numa-agent.io/core}\n"
    )
    sandbox = node.pod("shared", QoSClass.BURSTABLE, annotations={"numa-agent.io/affinity": rule})
    with pytest.raises(CRIError) as refused:
        node.container(sandbox, "main", 100, 0)
    assert refused.value.code == grpc.StatusCode.INVALID_ARGUMENT
    assert "only for containers with exclusive CPUs" in refused.value.details
    _, pinned = node.guaranteed("pinned", 2, annotations={"numa-agent.io/affinity": rule})
    assert len(CPUSet.parse(node.cpus(pinned))) == 2


def test_selectors_never_see_kubelets_own_labels(make_node: NodeFactory) -> None:
    """Every sandbox carries io.kubernetes.pod.namespace; Kubernetes' selectors never
    see it, so an anti-affinity to it repels nobody."""
    node = make_node("xeon-2s-2numa", "inprocess")
    replica(node, "db-0", annotations={})
    rule = (
        "podAntiAffinity:\n  requiredDuringSchedulingIgnoredDuringExecution:\n"
        "  - labelSelector: {matchLabels: {io.kubernetes.pod.namespace: default}}\n"
        "    topologyKey: kubernetes.io/hostname\n"
    )
    _, cid = node.guaranteed("loner", 2, annotations={"numa-agent.io/affinity": rule})
    assert len(CPUSet.parse(node.cpus(cid))) == 2


def test_a_huge_number_is_invalid_argument_naming_the_path(make_node: NodeFactory) -> None:
    node = make_node("xeon-2s-2numa", "inprocess")
    rule = (
        "nodeAffinity:\n  requiredDuringSchedulingIgnoredDuringExecution:\n"
        "    nodeSelectorTerms:\n    - matchExpressions: [{key: x, operator: Gt, values: ['"
        + "5" * 5000
        + "']}]\n"
    )
    sandbox = node.pod("big", QoSClass.BURSTABLE, annotations={"numa-agent.io/affinity": rule})
    with pytest.raises(CRIError) as refused:
        node.container(sandbox, "main", 100, 0)
    assert refused.value.code == grpc.StatusCode.INVALID_ARGUMENT
    assert "matchExpressions[0].values[0]" in refused.value.details
    assert "Traceback" not in refused.value.details
