"""Updates to other containers: coalescing, retries with backoff in the background,
owed-and-kept in synchronous mode, and a cpuset that changed while its create was in flight."""

from __future__ import annotations

import threading

import grpc
import pytest

from agent.kubelet import kubelet_container_resources
from agent.node.agent import CREATE_CONTAINER
from agent.node.updates import Updater
from agent.relay.backend import BackendError
from agent.runtime.inprocess import IN_PROCESS_ENDPOINT, in_process_forward
from agent.workload import QoSClass
from proto import cri_pb2
from tests.node.conftest import MODES, NodeFactory
from topology.cpuset import CPUSet


def _res(cpus: str, shares: int = 2) -> cri_pb2.LinuxContainerResources:
    return cri_pb2.LinuxContainerResources(cpuset_cpus=cpus, cpuset_mems="0", cpu_shares=shares)


class _Recorder:
    def __init__(self, failures: list[grpc.StatusCode] | None = None) -> None:
        self.sent: list[tuple[str, str, int]] = []
        self.failures = list(failures or [])

    def __call__(self, cid: str, res: cri_pb2.LinuxContainerResources) -> None:
        if self.failures:
            code = self.failures.pop(0)
            raise BackendError("Update", IN_PROCESS_ENDPOINT, code, "injected")
        self.sent.append((cid, res.cpuset_cpus, res.cpu_shares))


def test_only_the_latest_wish_is_sent() -> None:
    rec = _Recorder()
    up = Updater(rec)
    up.set_applied("a", "0-7", "0")
    up.want("a", _res("2-7"))
    up.want("a", _res("4-7", shares=100))
    up.want("b", _res("1"))
    assert up.pending() == 2
    assert up.flush() == 0
    assert sorted(rec.sent) == [("a", "4-7", 100), ("b", "1", 2)]


def test_wish_back_to_what_the_runtime_has_is_not_owed() -> None:
    rec = _Recorder()
    up = Updater(rec)
    up.set_applied("a", "0-7", "0")
    up.want("a", _res("2-7"))
    up.want("a", _res("0-7"))
    assert up.pending() == 0
    assert up.flush() == 0 and rec.sent == []


@pytest.mark.parametrize(
    ("code", "still_owed"),
    [(grpc.StatusCode.UNAVAILABLE, 1), (grpc.StatusCode.NOT_FOUND, 0)],
)
def test_failed_send_kept_unless_the_container_is_gone(
    code: grpc.StatusCode, still_owed: int
) -> None:
    up = Updater(_Recorder([code]))
    up.want("a", _res("1"))
    assert up.flush() == still_owed


def test_background_worker_retries_with_backoff() -> None:
    rec = _Recorder([grpc.StatusCode.UNAVAILABLE] * 3)
    up = Updater(rec)
    up.start_worker()
    try:
        up.want("a", _res("1-3"))
        assert up.wait_idle(5.0)
        assert rec.sent == [("a", "1-3", 2)]
        assert rec.failures == []
    finally:
        up.stop()


@pytest.mark.parametrize("mode", MODES)
def test_failed_update_never_fails_the_create(make_node: NodeFactory, mode: str) -> None:
    node = make_node("desktop-1s-4c-ht", mode)
    be = node.container(node.pod("batch"), "batch")
    node.runtime.fail_next("UpdateContainerResources", grpc.StatusCode.UNAVAILABLE, "busy")
    _, g = node.guaranteed("db", 2)
    exclusive = CPUSet.parse(node.cpus(g))
    if mode == "inprocess":
        # Synchronous: the failure is logged and the update kept for the next attempt.
        assert node.agent.pending_updates() == 1
        assert node.cpus(be) == str(node.machine.cpus)
        node.container(node.pod("other"), "other")  # the next decision sends what is owed
    node.settle()
    assert node.agent.pending_updates() == 0
    assert CPUSet.parse(node.cpus(be)) == node.machine.cpus - exclusive


def test_cpuset_changed_while_create_in_flight_is_sent_after(make_node: NodeFactory) -> None:
    node = make_node("desktop-1s-4c-ht", "inprocess")
    handler = node.agent.handlers()[CREATE_CONTAINER]
    forward = in_process_forward(node.runtime, CREATE_CONTAINER)
    g_pod = node.pod("db", QoSClass.GUARANTEED)
    be_pod = node.pod("batch")
    g: list[str] = []

    def slow_forward(request: bytes) -> bytes:
        # While batch's create is at the runtime, db is placed and takes exclusive CPUs.
        g.append(node.container(g_pod, "db", 2000, 2000))
        return forward(request)

    from agent.kubelet import kubelet_container_config

    config = kubelet_container_config(node.pods[be_pod], "batch")
    request = cri_pb2.CreateContainerRequest(
        pod_sandbox_id=be_pod, config=config, sandbox_config=node.pods[be_pod]
    )
    reply = handler(request.SerializeToString(), slow_forward)
    be = cri_pb2.CreateContainerResponse.FromString(reply).container_id
    node.settle()
    exclusive = CPUSet.parse(node.cpus(g[0]))
    assert len(exclusive) == 2
    assert CPUSet.parse(node.cpus(be)) == node.machine.cpus - exclusive


def test_decisions_do_not_hold_the_lock_during_forward(make_node: NodeFactory) -> None:
    """A create blocked at the runtime does not block another container's decision."""
    node = make_node("desktop-1s-4c-ht", "inprocess")
    handler = node.agent.handlers()[CREATE_CONTAINER]
    forward = in_process_forward(node.runtime, CREATE_CONTAINER)
    entered, release = threading.Event(), threading.Event()

    def blocked_forward(request: bytes) -> bytes:
        entered.set()
        assert release.wait(5.0)
        return forward(request)

    from agent.kubelet import kubelet_container_config

    a_pod, b_pod = node.pod("a"), node.pod("b")
    config = kubelet_container_config(node.pods[a_pod], "a")
    request = cri_pb2.CreateContainerRequest(
        pod_sandbox_id=a_pod, config=config, sandbox_config=node.pods[a_pod]
    ).SerializeToString()
    worker = threading.Thread(target=handler, args=(request, blocked_forward))
    worker.start()
    try:
        assert entered.wait(5.0)
        b = node.container(b_pod, "b")  # would deadlock if the lock were held
        assert node.cpus(b) == str(node.machine.cpus)
    finally:
        release.set()
        worker.join(5.0)
    assert {p.name for p in node.agent.placements()} == {"a", "b"}


def test_failed_kubelet_resize_leaves_the_move_owed(make_node: NodeFactory) -> None:
    node = make_node("desktop-1s-4c-ht", "inprocess")
    be = node.container(node.pod("batch"), "batch")
    _, g = node.guaranteed("db", 2)
    before = node.cpus(g)
    node.runtime.fail_next("UpdateContainerResources", grpc.StatusCode.UNAVAILABLE, "busy")
    from agent.kubelet import kubelet_container_resources
    from devtools.criclient import CRIError

    with pytest.raises(CRIError) as err:
        node.kubelet.update_container_resources(g, kubelet_container_resources(4000, 4000, 1 << 30))
    assert (err.value.code, err.value.details) == (grpc.StatusCode.UNAVAILABLE, "busy")
    # The policy moved db to 4 CPUs; the agent then sent the move itself with the
    # resources the runtime last accepted (kubelet's new quota is kubelet's to retry).
    placed = {p.container_id: p.cpuset_cpus for p in node.agent.placements()}
    assert len(CPUSet.parse(placed[g])) == 4 and placed[g] != before
    assert node.cpus(g) == placed[g]
    assert node.linux(g).cpu_quota == 200_000
    assert CPUSet.parse(node.cpus(be)).isdisjoint(CPUSet.parse(placed[g]))
    assert node.agent.pending_updates() == 0


def test_a_resize_and_the_agents_update_land_in_order(make_node: NodeFactory) -> None:
    """kubelet resizes a container (memory 256 MiB) while the agent's cpuset update for
    it, built from the old resources (128 MiB), is still at the runtime. One writer
    per container, in order: the resize waits for the agent's update, so the runtime
    ends with kubelet's latest resources and the agent's cpuset."""
    node = make_node("desktop-1s-4c-ht", "grpc")
    batch = node.container(node.pod("batch", QoSClass.BURSTABLE), "batch", 500, memory=128 << 20)
    node.settle()
    gate = node.runtime.hold_next("UpdateContainerResources")
    node.guaranteed("db", 2)  # the agent narrows batch; that update is held
    assert gate.entered.wait(5), "the agent never sent batch its new cpuset"
    resized = kubelet_container_resources(500, 0, 256 << 20)
    done = threading.Event()

    def resize() -> None:
        node.kubelet.update_container_resources(batch, resized)
        done.set()

    worker = threading.Thread(target=resize)
    worker.start()
    try:
        overtook = done.wait(0.5)
    finally:
        gate.release.set()
        worker.join(10)
    assert not overtook, "kubelet's resize overtook the agent's update in flight"
    assert done.is_set()
    node.settle()
    linux = node.linux(batch)
    placed = {p.container_id: p for p in node.agent.placements()}
    assert linux.memory_limit_in_bytes == 256 << 20
    assert linux.cpuset_cpus == placed[batch].cpuset_cpus
    assert node.agent.pending_updates() == 0


class _Hang:
    """Sends that block for the containers named in `hung` until `release` is set."""

    def __init__(self, hung: set[str]) -> None:
        self.hung = hung
        self.release = threading.Event()
        self.sent: dict[str, threading.Event] = {}
        self.lock = threading.Lock()

    def __call__(self, cid: str, res: cri_pb2.LinuxContainerResources) -> None:
        if cid in self.hung:
            self.release.wait(30)
            raise BackendError("Update", IN_PROCESS_ENDPOINT, grpc.StatusCode.DEADLINE_EXCEEDED, "")
        with self.lock:
            self.sent.setdefault(cid, threading.Event()).set()

    def done(self, cid: str) -> threading.Event:
        with self.lock:
            return self.sent.setdefault(cid, threading.Event())


@pytest.mark.parametrize("hung", [1, 3, 10])
def test_a_hung_containers_update_never_delays_anothers(hung: int) -> None:
    names = {f"hung-{i}" for i in range(hung)}
    send = _Hang(names)
    up = Updater(send)
    up.start_worker()
    try:
        for name in sorted(names):
            up.want(name, _res("0-1"))
        up.want("healthy", _res("1"))
        # The healthy one goes through while every hung one is still at the runtime.
        assert send.done("healthy").wait(10), "the healthy update waited behind the hung ones"
        assert up.in_flight() == names
    finally:
        send.release.set()
        up.stop()


def test_a_failed_updates_outcome_is_unknown_so_the_old_cpuset_is_sent_again() -> None:
    """A widening times out (the shim may apply it when resumed); narrowing back to
    what the runtime had before must still be sent, not dropped as 'already applied'."""
    rec = _Recorder([grpc.StatusCode.DEADLINE_EXCEEDED])
    up = Updater(rec)
    up.set_applied("a", "1", "0")
    up.want("a", _res("0-1"))
    assert up.flush() == 1 and up.is_unknown("a")
    up.want("a", _res("1"))
    assert up.pending() == 1
    assert up.flush() == 0
    assert rec.sent == [("a", "1", 2)]
    assert not up.is_unknown("a")


def test_a_read_back_makes_an_unknown_cpuset_known() -> None:
    up = Updater(_Recorder([grpc.StatusCode.UNAVAILABLE]))
    up.set_applied("a", "1", "0")
    up.want("a", _res("0-1"))
    up.flush()
    up.want("a", _res("1"))
    up.confirm("a", "0-1", "0")  # read back: the runtime has 0-1 (the failed one went through)
    assert not up.is_unknown("a") and up.pending() == 1  # 1 is still owed
    up.confirm("a", "1", "0")  # nothing unknown any more: a read back changes nothing
    assert up.pending() == 1


class _Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_a_resend_does_not_reset_the_back_off_and_each_step_is_logged_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    clock = _Clock()
    rec = _Recorder([grpc.StatusCode.UNAVAILABLE] * 20)
    up = Updater(rec, clock)
    up.want("a", _res("1"))
    retry_at = []
    for _ in range(12):
        up.flush()
        retry_at.append(up.retry_at("a"))
        up.force("a")  # what the reconcile's re-send does
        up.want("a", _res("1"))
        assert up.retry_at("a") == retry_at[-1]
    waits = [round(at - clock.now, 2) for at in retry_at if at is not None]
    assert waits == [0.05, 0.1, 0.2, 0.4, 0.8, 1.6, 3.2, 5.0, 5.0, 5.0, 5.0, 5.0]
    warnings = [r for r in caplog.records if r.levelname == "WARNING" and "failed" in r.message]
    assert len(warnings) == 8  # one per step up to the cap, then quiet


def test_after_an_unknown_outcome_the_kernel_is_read_back_and_a_difference_sent_again() -> None:
    """A call stuck at a stopped shim may be applied after the one that went through:
    the kernel's view is read back, and a late widening is undone."""
    rec = _Recorder([grpc.StatusCode.DEADLINE_EXCEEDED])
    views = [("0-1", "0"), ("1", "0")]  # the stuck widening landed late; then right
    seen: list[str] = []

    def verify(cid: str) -> tuple[str, str] | None:
        seen.append(cid)
        return views.pop(0) if views else ("1", "0")

    up = Updater(rec, verify=verify)
    up.start_worker()
    try:
        up.set_applied("a", "0-1", "0")
        up.want("a", _res("1"))
        assert up.wait_idle(20)
        assert rec.sent == [("a", "1", 2), ("a", "1", 2)]
        assert seen == ["a", "a"] and not up.is_unknown("a")
    finally:
        up.stop()
