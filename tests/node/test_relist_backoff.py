"""A container a relist shows and the agent cannot adopt is tried again after a
growing wait (agent/node/backoff.py), with one error line per try, instead of a
runtime call and the same error on every relist. The clock is a fake one: no test
here waits for time to pass."""

from __future__ import annotations

import itertools
import logging
from collections.abc import Callable

import grpc
import pytest

from agent.kubelet import kubelet_container_config
from agent.node import backoff
from agent.node.agent import NodeAgent
from agent.node.backoff import Backoff
from agent.node.runtime_access import InProcessRuntimeAccess
from agent.policy.config import PolicyConfig
from agent.policy.request import PREFER_SHARED
from agent.workload import QoSClass
from devtools.fake_runtime import FaultyRuntime
from proto import cri_pb2
from tests.node.conftest import InProcessKubelet, Node
from topology.tree import Machine

GI = 1 << 30
# 5, 10, 20, 40, 80, 160, then 300 s for ever: the documented numbers.
STEPS = [5.0, 10.0, 20.0, 40.0, 80.0, 160.0, 300.0, 300.0, 300.0]


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_the_waits_double_from_the_first_up_to_the_cap() -> None:
    clock = FakeClock()
    retries = Backoff(clock)
    assert (backoff.FIRST_S, backoff.FACTOR, backoff.CAP_S) == (5.0, 2.0, 300.0)
    waits = []
    for _ in STEPS:
        assert retries.due("c")
        waits.append(retries.failed("c"))
        assert not retries.due("c")
        clock.now += waits[-1] - 0.001
        assert not retries.due("c")
        clock.now += 0.001
    assert waits == STEPS
    retries.succeeded("c")
    assert retries.next_delay("c") == backoff.FIRST_S and len(retries) == 0


def test_keys_not_listed_any_more_are_forgotten() -> None:
    retries = Backoff(FakeClock())
    retries.failed("gone")
    retries.failed("still-there")
    retries.keep_only(["still-there", "new"])
    assert retries.due("gone") and not retries.due("still-there") and len(retries) == 1


@pytest.mark.parametrize(
    ("first_s", "factor", "cap_s"), [(0, 2, 10), (1, 0.5, 10), (10, 2, 1), (-1, 2, 10)]
)
def test_a_back_off_that_would_not_back_off_is_refused(
    first_s: float, factor: float, cap_s: float
) -> None:
    with pytest.raises(ValueError, match="back-off needs"):
        Backoff(first_s=first_s, factor=factor, cap_s=cap_s)


def _node(machines: Callable[[str], Machine], clock: FakeClock) -> Node:
    runtime = FaultyRuntime()
    agent = NodeAgent(
        machines("desktop-1s-4c-ht"),
        PolicyConfig.from_mapping({}),
        InProcessRuntimeAccess(runtime),
        adoption_backoff=Backoff(clock),
    )
    return Node(agent, runtime, InProcessKubelet(agent, runtime), agent.machine)


def _behind_the_agents_back(node: Node, sandbox: str, name: str) -> str:
    """A Guaranteed container (2 CPUs) made straight at the runtime in `sandbox`."""
    pod = node.pods[sandbox]
    config = kubelet_container_config(pod, name, 2000, 2000, GI)
    request = cri_pb2.CreateContainerRequest(
        pod_sandbox_id=sandbox, config=config, sandbox_config=pod
    )
    return str(node.runtime.create_container(request).container_id)


def _status_calls(node: Node, cid: str) -> int:
    calls = node.runtime.calls
    return sum(c.method == "ContainerStatus" and c.request.container_id == cid for c in calls)


def _relist_every_second(node: Node, clock: FakeClock, cid: str, seconds: int) -> list[int]:
    """kubelet's relist once a (fake) second; the seconds at which `cid` was tried."""
    tried = []
    start = clock.now
    for second in range(seconds):
        clock.now = start + second
        statuses = _status_calls(node, cid)
        node.kubelet.list_containers()
        if _status_calls(node, cid) > statuses:
            tried.append(second)
    return tried


def test_a_container_that_cannot_be_adopted_is_tried_and_logged_once_per_step(
    machines: Callable[[str], Machine], caplog: pytest.LogCaptureFixture
) -> None:
    clock = FakeClock()
    node = _node(machines, clock)
    try:
        # A pod whose annotation the policy cannot read: no container of it can be
        # placed, nor adopted. Its container is made past the agent.
        sandbox = node.pod(
            "odd", QoSClass.GUARANTEED, annotations={PREFER_SHARED + "/pod": "maybe"}
        )
        odd = _behind_the_agents_back(node, sandbox, "odd")
        caplog.set_level(logging.ERROR, logger="agent.node.adoption")
        seconds = int(sum(STEPS[:6])) + 1  # 316 relists
        tried = _relist_every_second(node, clock, odd, seconds)
        assert tried[0] == 0 and [b - a for a, b in itertools.pairwise(tried)] == STEPS[:6]
        # One error line per try, naming the container and when it is tried again.
        lines = [r.getMessage() for r in caplog.records]
        assert len(lines) == len(tried) == 7
        assert all("cannot adopt" in line and "'odd'" in line for line in lines)
        assert [line.rsplit("; trying again in ", 1)[1] for line in lines] == [
            f"{s:.0f} s" for s in STEPS[:7]
        ]
        assert odd not in {p.container_id for p in node.agent.placements()}
    finally:
        node.agent.close()


def test_a_container_whose_status_failed_is_adopted_at_its_next_try(
    machines: Callable[[str], Machine],
) -> None:
    clock = FakeClock()
    node = _node(machines, clock)
    try:
        sandbox = node.pod("late", QoSClass.GUARANTEED)
        late = _behind_the_agents_back(node, sandbox, "late")
        node.runtime.fail_next("ContainerStatus", grpc.StatusCode.UNAVAILABLE, "shim busy")
        tried = _relist_every_second(node, clock, late, int(backoff.FIRST_S) + 3)
        assert tried == [0, int(backoff.FIRST_S)]  # failed, then not until its wait ran out
        assert late in {p.container_id for p in node.agent.placements()}
        # Adopted: never looked at again.
        assert _relist_every_second(node, clock, late, int(backoff.CAP_S) // 10) == []
    finally:
        node.agent.close()
