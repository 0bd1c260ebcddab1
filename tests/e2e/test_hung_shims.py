"""Updates never wait behind a stranger's trouble, and an update whose outcome is
unknown is verified, not assumed: on real containerd and runc, with the shims of
some containers stopped (SIGSTOP: a hung shim or a frozen cgroup looks the same to
the agent). Every check reads /proc/<pid>/status of the container's process; every
stopped shim is resumed in a `finally`. Needs root and containerd."""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from agent.daemon import Daemon
from agent.workload import QoSClass
from devtools.containerd import PrivateContainerd
from tests.e2e import test_kernel_truth
from tests.e2e.test_kernel_truth import AgentFactory, create, kernel, settle, wanted

make_agent = test_kernel_truth.make_agent  # the fixture, shared

pytestmark = [pytest.mark.root, pytest.mark.containerd]

WAIT_S = 30.0


def shim_pid(sandbox_id: str) -> int:
    """The pid of the containerd shim serving `sandbox_id` (containerd 1.6 runs one
    runc v2 shim per pod, started with `-id <sandbox id>`)."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            args = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if args and b"containerd-shim" in args[0] and sandbox_id.encode() in args:
            return int(entry.name)
    raise AssertionError(f"no shim process for sandbox {sandbox_id}")


@contextlib.contextmanager
def stopped(pids: list[int]) -> Iterator[None]:
    for pid in pids:
        os.kill(pid, signal.SIGSTOP)
    try:
        yield
    finally:
        for pid in pids:
            os.kill(pid, signal.SIGCONT)


def wait_for(condition: object, what: str) -> None:
    assert callable(condition)
    deadline = time.monotonic() + WAIT_S
    while not condition():
        assert time.monotonic() < deadline, what
        time.sleep(0.05)


def node(daemon: Daemon) -> object:
    assert daemon.node is not None
    return daemon.node


@pytest.mark.parametrize("hung", [1, 3])
def test_a_healthy_container_leaves_a_new_exclusive_cpu_while_other_shims_hang(
    containerd: PrivateContainerd, make_agent: AgentFactory, hung: int
) -> None:
    # A deadline far beyond the test: the stuck updates stay at the runtime throughout,
    # so one queue would keep the healthy container's update behind them.
    daemon, pods = make_agent(reconcile_period=0, update_timeout=600)
    assert daemon.node is not None
    stuck = [create(pods, f"stuck-{i}", QoSClass.BESTEFFORT, 0) for i in range(hung)]
    for _, cid in stuck:
        pods.client.start_container(cid)
    _, healthy = create(pods, "healthy", QoSClass.BESTEFFORT, 0)
    pods.client.start_container(healthy)
    settle(daemon)
    with stopped([shim_pid(sandbox) for sandbox, _ in stuck]):
        _, guaranteed = create(pods, "g", QoSClass.GUARANTEED, 1000)
        pods.client.start_container(guaranteed)
        own = kernel(containerd, guaranteed)
        assert len(own) == 1
        wait_for(
            lambda: kernel(containerd, healthy).isdisjoint(own),
            "the healthy container stayed on the new exclusive CPU",
        )
        # ... while every stuck container's update is still at its stopped shim.
        assert daemon.node.updates_in_flight() == {cid for _, cid in stuck}
    # Resumed: the stuck ones are moved off too.
    settle(daemon)
    for _, cid in stuck:
        assert kernel(containerd, cid).isdisjoint(own), cid


def test_an_update_that_timed_out_is_not_taken_as_not_applied(
    containerd: PrivateContainerd, make_agent: AgentFactory
) -> None:
    """A widening times out at a stopped shim, which applies it when resumed; a new
    exclusive CPU then wants the container narrowed back to what it had before. With
    no periodic reconcile, that narrowing must still reach the kernel."""
    daemon, pods = make_agent(reconcile_period=0, update_timeout=1)
    assert daemon.node is not None
    first_pod, first = create(pods, "first", QoSClass.GUARANTEED, 1000)
    pods.client.start_container(first)
    batch_pod, batch = create(pods, "batch", QoSClass.BESTEFFORT, 0)
    pods.client.start_container(batch)
    settle(daemon)
    with stopped([shim_pid(batch_pod)]):
        pods.remove(first_pod)  # batch is widened: the update hangs at its shim, times out
        wait_for(
            lambda: daemon.node is not None and daemon.node._updater.is_unknown(batch),
            "the widening never timed out",
        )
        _, second = create(pods, "second", QoSClass.GUARANTEED, 1000)
        pods.client.start_container(second)
    own = kernel(containerd, second)
    settle(daemon)
    assert kernel(containerd, batch).isdisjoint(own)
    assert kernel(containerd, batch) == wanted(daemon, batch)
