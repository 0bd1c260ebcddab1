"""The plugin against the runtime stand-in over a real unix socket: the same node
agent behind NRI's door (placement, refusals, give-back, restart, reconnect,
unsolicited updates, version refusal)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from agent.nri import methods, ttrpc
from agent.nri.connection import RpcError
from agent.workload import QoSClass
from devtools.nri_runtime import NriRuntimeStandIn
from proto import cri_pb2, nri_pb2
from tests.nri.conftest import (
    GIB,
    Plugged,
    create_app,
    guaranteed_app,
    run_pod,
    shared_app,
)
from tests.waiting import wait_until
from topology.cpuset import CPUSet

Plug = Callable[..., Plugged]


def test_the_plugin_registers_by_name_and_index_and_subscribes_to_what_it_handles(
    standin: NriRuntimeStandIn, plug: Plug
) -> None:
    plug(standin)
    (registration,) = standin.recorded.registrations
    assert (registration.plugin_name, registration.plugin_idx) == ("numa-agent", "90")
    subscribed = {e for e in range(1, nri_pb2.LAST) if standin.events & (1 << (e - 1))}
    assert subscribed == set(methods.SUBSCRIBED)


def test_exclusive_cpus_move_shared_containers_off_and_back(
    standin: NriRuntimeStandIn, plug: Plug
) -> None:
    plugged = plug(standin)
    shared = shared_app(standin)
    before = CPUSet.parse(standin.cpus(shared))
    pod_id, exclusive = guaranteed_app(standin, "db", 2)
    mine = CPUSet.parse(standin.cpus(exclusive))
    assert len(mine) == 2
    # The shared container was moved off in CreateContainer's own reply.
    assert not mine & CPUSet.parse(standin.cpus(shared))
    assert standin.recorded.unsolicited == []
    placed = {p.container_id: p for p in plugged.node.placements()}
    assert placed[exclusive].exclusive and CPUSet.parse(placed[exclusive].cpuset_cpus) == mine
    # A stopped container's CPUs stay its pod's (a re-create gets them back) ...
    standin.stop_container(exclusive)
    assert not mine & CPUSet.parse(standin.cpus(shared))
    assert exclusive not in {p.container_id for p in plugged.node.placements()}
    # ... until its sandbox stops: NRI's StopPodSandbox has no reply to carry them,
    # so the shared container is widened again by an unsolicited UpdateContainers.
    standin.stop_pod(pod_id)
    wait_until(
        lambda: CPUSet.parse(standin.cpus(shared)) == before,
        what="the shared container widened again after the pod stopped",
    )
    assert standin.recorded.unsolicited
    standin.remove_pod(pod_id)


def test_a_bad_annotation_fails_the_creation_naming_container_and_annotation(
    standin: NriRuntimeStandIn, plug: Plug
) -> None:
    plug(standin)
    bad = {"cri-resource-manager.intel.com/affinity": "app:\n- match: {key: name, operator: Equal}"}
    pod = run_pod(standin, "typo", annotations=bad)
    with pytest.raises(RpcError) as err:
        create_app(standin, pod, 100)
    assert err.value.code == ttrpc.INVALID_ARGUMENT
    assert "cri-resource-manager.intel.com/affinity" in err.value.message
    assert 'container "app", rule 1' in err.value.message
    assert not [c for c in standin.containers.values() if c.pod_sandbox_id == pod.id]


def test_no_capacity_is_refused_with_the_proxys_reason(
    standin: NriRuntimeStandIn, plug: Plug
) -> None:
    plug(standin, shape="desktop-1s-4c-ht")
    pod = run_pod(standin, "huge", QoSClass.GUARANTEED)
    with pytest.raises(RpcError) as err:
        create_app(standin, pod, 64000, 64000, GIB)
    assert err.value.code == ttrpc.RESOURCE_EXHAUSTED
    assert "huge" in err.value.message


def test_a_restarted_agent_is_synchronized_back_with_nothing_moved(
    standin: NriRuntimeStandIn, plug: Plug
) -> None:
    first = plug(standin)
    shared = shared_app(standin)
    _, exclusive = guaranteed_app(standin, "db", 2)
    cpus = {cid: standin.cpus(cid) for cid in (shared, exclusive)}
    placements = first.node.placements()
    first.stop()
    standin.disconnect()
    standin.recorded.synchronize_updates.clear()
    second = plug(standin)  # same state directory: the state file brings it back
    assert standin.recorded.synchronize_updates == []
    assert {cid: standin.cpus(cid) for cid in cpus} == cpus
    assert second.node.placements() == placements


def test_a_dropped_connection_is_reconnected_and_synchronized_again(
    standin: NriRuntimeStandIn, plug: Plug
) -> None:
    plugged = plug(standin)
    shared = shared_app(standin)
    _, exclusive = guaranteed_app(standin, "db", 2)
    cpus = {cid: standin.cpus(cid) for cid in (shared, exclusive)}
    standin.disconnect()  # the runtime restarted
    assert standin.wait_ready(10)
    assert len(standin.recorded.registrations) == 2
    assert standin.recorded.synchronize_updates == []
    assert {cid: standin.cpus(cid) for cid in cpus} == cpus
    # And it still places.
    _, other = guaranteed_app(standin, "db2", 2)
    assert not CPUSet.parse(standin.cpus(other)) & CPUSet.parse(cpus[exclusive])
    assert plugged.session.connections == 2


def test_containers_the_state_file_lacks_are_adopted_where_they_run(
    sock_dir: Path, plug: Plug
) -> None:
    with NriRuntimeStandIn(sock_dir / "nri.sock", sync_chunk=2) as standin:
        # Containers the runtime started before the plugin ever connected.
        for n in range(5):
            create_app(standin, run_pod(standin, f"p{n}"), 200, start=False)
        pinned = next(iter(standin.containers.values()))
        pinned.linux.resources.cpu.cpus = "3"
        pinned.state = nri_pb2.CONTAINER_RUNNING
        plugged = plug(standin)
        placed = {p.container_id: p for p in plugged.node.placements()}
        assert set(placed) == set(standin.containers)


def test_a_resize_answers_the_containers_new_cpuset(standin: NriRuntimeStandIn, plug: Plug) -> None:
    plug(standin)
    _, exclusive = guaranteed_app(standin, "db", 2)
    standin.update_container(
        exclusive,
        cri_pb2.LinuxContainerResources(
            cpu_shares=4096, cpu_quota=400000, cpu_period=100000, memory_limit_in_bytes=GIB
        ),
    )
    assert len(CPUSet.parse(standin.cpus(exclusive))) == 4


def test_updates_outside_a_request_go_as_unsolicited_update_containers(
    standin: NriRuntimeStandIn, plug: Plug
) -> None:
    plugged = plug(standin)
    shared = shared_app(standin)
    wanted = standin.cpus(shared)
    standin.containers[shared].linux.resources.cpu.cpus = "0"  # changed behind its back
    assert plugged.node.resend(shared)  # what the reconcile does on a repair
    assert standin.wait_unsolicited(1)
    (request,) = standin.recorded.unsolicited
    assert [u.container_id for u in request.update] == [shared]
    assert standin.cpus(shared) == wanted


@pytest.mark.parametrize(
    ("version", "accepted"),
    [("v0.12.0", True), ("v0.6.1", True), ("", True), ("v0.2.0", False), ("v1.0.0", False)],
)
def test_nri_versions_the_agent_does_not_speak_are_refused_clearly(
    sock_dir: Path, plug: Plug, version: str, accepted: bool
) -> None:
    with NriRuntimeStandIn(sock_dir / "nri.sock", nri_version=version) as standin:
        plug(standin)
        if accepted:
            assert standin.configure_error is None
        else:
            assert standin.configure_error is not None
            assert standin.configure_error.code == ttrpc.FAILED_PRECONDITION
            assert f"uses NRI {version}; numa-agent speaks NRI v0.3" in str(standin.configure_error)
