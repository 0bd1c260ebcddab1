"""The runtime goes down and comes back (containerd restarting): calls fail fast
with UNAVAILABLE naming the runtime, the agent keeps serving and reconnects by
itself, and the cpuset updates owed meanwhile land once the runtime is back."""

from __future__ import annotations

import threading
import time

import grpc
import pytest

from agent.workload import QoSClass
from devtools.criclient import CRIClient, CRIError
from proto import cri_pb2
from tests.robust.harness import Stack, create, live, run_pod
from tests.waiting import LIMIT_S, wait_until
from topology.cpuset import CPUSet

USABLE = CPUSet.range(1, 7)  # desktop-1s-4c-ht with reserved_cpus '0'


def _unavailable(call: object, endpoint: str) -> None:
    """Make the call; it must fail with UNAVAILABLE naming `endpoint`."""
    with pytest.raises(CRIError) as err:
        call()  # type: ignore[operator]
    assert err.value.code == grpc.StatusCode.UNAVAILABLE, err.value
    assert endpoint in err.value.details, err.value.details


def test_runtime_restart_mid_placement(stack: Stack) -> None:
    client, runtime = stack.client, stack.server.runtime
    sandbox, pod = run_pod(client, "batch", QoSClass.BESTEFFORT)
    batch = create(client, sandbox, pod, "batch", 0)
    db_sandbox, db_pod = run_pod(client, "db")
    db = create(client, db_sandbox, db_pod, "db", 2)
    late_sandbox, late_pod = run_pod(client, "late")
    db_cpus = live(runtime)[db]
    assert len(db_cpus) == 2 and live(runtime)[batch] == USABLE - db_cpus

    # db's container stops (its CPUs stay kept for a re-create until its sandbox
    # stops). The runtime starts shutting down while it stops db's sandbox: that
    # call completes, and the update giving db's CPUs back to batch finds it gone.
    client.stop_container(db)
    gate = runtime.hold_next("StopPodSandbox")
    stopping = threading.Thread(target=client.stop_pod_sandbox, args=(db_sandbox,))
    stopping.start()
    assert gate.entered.wait(5)
    down = threading.Thread(target=stack.server.down, kwargs={"grace": 10})
    down.start()
    wait_until(lambda: not stack.server.path.exists(), LIMIT_S, "the runtime to stop accepting")
    gate.release.set()
    down.join(10)
    stopping.join(10)
    assert (
        runtime.container_status(cri_pb2.ContainerStatusRequest(container_id=db)).status.state
        == cri_pb2.CONTAINER_EXITED
    ), "the call in flight at the runtime completed"
    wait_until(lambda: stack.node.pending_updates() == 1, LIMIT_S, "the update to batch to be owed")

    # Down: every call fails fast with UNAVAILABLE naming the runtime; the agent serves.
    # UNAVAILABLE, not DEADLINE_EXCEEDED: failed before the caller's deadline, not at it.
    for call in (client.version, client.list_containers, lambda: client.container_status(db)):
        _unavailable(call, stack.server.endpoint)
    # A create the runtime cannot take gives its CPUs back at once.
    before = stack.node.placements()
    _unavailable(lambda: create(client, late_sandbox, late_pod, "late", 2), stack.server.endpoint)
    assert stack.node.placements() == before
    assert stack.node.pending_updates() == 1
    assert live(runtime)[batch] == USABLE - db_cpus  # not yet told

    # Back, with the same pods and containers: the agent reconnects by itself and
    # the owed update lands.
    stack.server.up()
    wait_until(lambda: stack.node.pending_updates() == 0, 15, "the owed update to land")
    assert live(runtime)[batch] == USABLE
    assert client.version().runtime_name
    assert [p.cpuset_cpus for p in stack.node.placements()] == [str(USABLE)]


def test_reconnects_promptly_after_a_long_outage(stack: Stack) -> None:
    """gRPC's own reconnect backoff grows towards 2 minutes; after 10 s down it would
    already wait ~4-6 s more. The relay caps it at 1 s, so kubelet's calls work
    again about as soon as the runtime is back."""
    client = stack.client
    stack.server.down()
    give_up = time.monotonic() + 10.0
    while time.monotonic() < give_up:  # kubelet keeps calling (once a second)
        _unavailable(client.version, stack.server.endpoint)
        time.sleep(0.5)
    stack.server.up()
    back = time.monotonic()
    wait_until(lambda: _answers(client), 30, "the relay to reach the runtime again")
    assert time.monotonic() - back < 3.0


def _answers(client: CRIClient) -> bool:
    try:
        client.version()
    except CRIError as err:
        assert err.code == grpc.StatusCode.UNAVAILABLE, err
        return False
    return True


def test_a_duplicate_create_in_flight_is_aborted(stack: Stack) -> None:
    """kubelet gave up on a slow create and sent it again (same pod, name, attempt):
    placing it twice would make both share one allocation, so the second is refused
    with ABORTED and the first one alone gets the CPUs."""
    client, runtime = stack.client, stack.server.runtime
    sandbox, pod = run_pod(client, "db")
    gate = runtime.hold_next("CreateContainer")
    first: list[str] = []
    slow = threading.Thread(target=lambda: first.append(create(client, sandbox, pod, "db", 2)))
    slow.start()
    assert gate.entered.wait(5)
    with pytest.raises(CRIError) as err:
        create(client, sandbox, pod, "db", 2)
    assert err.value.code == grpc.StatusCode.ABORTED
    assert "already in flight" in err.value.details
    gate.release.set()
    slow.join(10)
    assert first
    placed = stack.node.placements()
    assert [(p.container_id, p.exclusive) for p in placed] == [(first[0], True)]
    assert set(live(runtime)) == {first[0]}
    # Once the first is done, kubelet's next attempt is placed afresh (no stale key).
    stack.client.remove_container(first[0])
    again = create(client, sandbox, pod, "db", 2)
    assert [p.container_id for p in stack.node.placements()] == [again]
