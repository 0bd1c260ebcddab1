"""The reconcile looks at every process of a container by its cgroup, on real
containerd and runc (cgroup v1 here): a process moved out of its container's
cgroup is reported once, not "repaired" every period. Needs root and containerd."""

from __future__ import annotations

import contextlib
import os
import signal
from pathlib import Path

import pytest

from agent.workload import QoSClass
from devtools.containerd import PrivateContainerd
from tests.e2e import test_kernel_truth
from tests.e2e.test_kernel_truth import AgentFactory, create, settle

pytestmark = [pytest.mark.root, pytest.mark.containerd]

make_agent = test_kernel_truth.make_agent  # the fixture, shared
ROOT_CPUSET = Path("/sys/fs/cgroup/cpuset/tasks")


def test_a_first_process_moved_out_of_its_cgroup_is_reported_once(
    containerd: PrivateContainerd, make_agent: AgentFactory
) -> None:
    if not ROOT_CPUSET.exists():
        pytest.skip("no cgroup v1 cpuset hierarchy at /sys/fs/cgroup/cpuset")
    daemon, pods = make_agent(reconcile_period=0)
    assert daemon.reconciler is not None
    _, db = create(pods, "db", QoSClass.GUARANTEED, 1000)
    pods.client.start_container(db)
    _, batch = create(pods, "batch", QoSClass.BESTEFFORT, 0)
    pods.client.start_container(batch)
    settle(daemon)
    first = daemon.reconciler.run_once()
    assert first.repaired == () and first.checked == 2
    pid = containerd.pid_of(batch)
    try:
        ROOT_CPUSET.write_text(str(pid))  # out of its container's cgroup, onto every CPU
        for _ in range(3):
            assert daemon.reconciler.run_once().repaired == ()
        (stray,) = daemon.reconciler.strays()
        assert stray.startswith(f"{batch}: pid {pid} in ")
        status = daemon.status()
        assert status["agent"]["stray_processes"] == [stray]
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)  # outside the container: runc would not kill it
