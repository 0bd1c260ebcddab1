"""The kernel agrees with the agent's record: an update that overlapped a start is sent
again once the start is over, and the periodic reconcile repairs what the kernel or
the runtime has wrong, naming the container.

The kernel's view comes from a /proc written by the test for the in-memory
runtime's pids (the real kernel's view is checked in tests/e2e)."""

from __future__ import annotations

import logging
import threading
from pathlib import Path

import pytest

from agent.node.reconcile import Reconciler
from agent.node.runtime_access import InProcessRuntimeAccess
from proto import cri_pb2
from tests.node.conftest import Node, NodeFactory
from topology.cpuset import CPUSet


class Counts:
    def __init__(self) -> None:
        self.repairs = 0
        self.resends = 0
        self.unrepairables = 0

    def repaired(self) -> None:
        self.repairs += 1

    def resent(self) -> None:
        self.resends += 1

    def unrepairable(self) -> None:
        self.unrepairables += 1


def pid_of(node: Node, cid: str) -> int:
    pid = InProcessRuntimeAccess(node.runtime).container_pid(cid)
    assert pid is not None
    return pid


def write_proc(proc: Path, pid: int, cpus: str, mems: str) -> None:
    status = proc / str(pid) / "status"
    status.parent.mkdir(parents=True, exist_ok=True)
    status.write_text(
        f"Name:\tsleep\nPid:\t{pid}\nCpus_allowed:\tff\nCpus_allowed_list:\t{cpus}\n"
        f"Mems_allowed:\t1\nMems_allowed_list:\t{mems}\n"
    )


def busy(make_node: NodeFactory) -> tuple[Node, str, str]:
    node = make_node("xeon-2s-2numa", "inprocess")
    batch = node.container(node.pod("batch"), "batch")
    _, db = node.guaranteed("db", 4)
    return node, batch, db


def reconciler(node: Node, proc: Path, counts: Counts) -> Reconciler:
    return Reconciler(
        node.agent, InProcessRuntimeAccess(node.runtime), 60, proc=proc, observer=counts
    )


def kernel_agrees(node: Node, proc: Path, *cids: str) -> None:
    for cid in cids:
        write_proc(proc, pid_of(node, cid), node.cpus(cid), node.mems(cid))


def test_nothing_to_do_when_everything_agrees(make_node: NodeFactory, tmp_path: Path) -> None:
    node, batch, db = busy(make_node)
    kernel_agrees(node, tmp_path, batch, db)
    counts = Counts()
    before = len(node.calls("UpdateContainerResources"))
    report = reconciler(node, tmp_path, counts).run_once()
    assert (report.checked, report.repaired, report.resent) == (2, (), 0)
    assert len(node.calls("UpdateContainerResources")) == before
    assert (counts.repairs, counts.resends) == (0, 0)


def test_a_cpu_the_kernel_allows_outside_the_record_is_repaired(
    make_node: NodeFactory, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    node, batch, db = busy(make_node)
    kernel_agrees(node, tmp_path, db)
    # The runtime says batch has its cpuset, but the kernel still lets it run on db's CPUs.
    stale = CPUSet.parse(node.cpus(batch)) | CPUSet.parse(node.cpus(db))
    write_proc(tmp_path, pid_of(node, batch), str(stale), node.mems(batch))
    counts = Counts()
    with caplog.at_level(logging.WARNING, logger="agent.node.reconcile"):
        report = reconciler(node, tmp_path, counts).run_once()
    assert report.repaired == (batch,) and counts.repairs == 1
    sent = [r for r in node.calls("UpdateContainerResources") if r.container_id == batch]
    assert sent[-1].linux.cpuset_cpus == node.cpus(batch)
    assert sent[-1].linux.cpu_shares == 2  # its full resources, not a bare cpuset
    message = caplog.records[-1].getMessage()
    assert "container 'batch' of pod default/batch" in message
    assert f"the kernel lets it run on CPUs {CPUSet.parse(node.cpus(db))}" in message


def test_a_cpuset_changed_behind_the_agents_back_is_repaired(
    make_node: NodeFactory, tmp_path: Path
) -> None:
    node, batch, db = busy(make_node)
    wanted = node.cpus(batch)
    # Someone (crictl, another agent) puts batch on db's CPUs straight at the runtime.
    node.runtime.update_container_resources(
        cri_pb2.UpdateContainerResourcesRequest(
            container_id=batch, linux=cri_pb2.LinuxContainerResources(cpuset_cpus=node.cpus(db))
        )
    )
    kernel_agrees(node, tmp_path, batch, db)
    counts = Counts()
    report = reconciler(node, tmp_path, counts).run_once()
    assert report.repaired == (batch,)
    assert node.cpus(batch) == wanted
    # Repaired: the next pass finds nothing to do.
    kernel_agrees(node, tmp_path, batch)
    assert reconciler(node, tmp_path, counts).run_once().repaired == ()


def test_without_the_kernels_view_every_cpuset_is_sent_again(
    make_node: NodeFactory, tmp_path: Path
) -> None:
    node, batch, db = busy(make_node)
    counts = Counts()
    before = len(node.calls("UpdateContainerResources"))
    report = reconciler(node, tmp_path / "no-proc", counts).run_once()
    assert (report.repaired, report.resent, counts.resends) == ((), 2, 2)
    after = node.calls("UpdateContainerResources")[before:]
    assert {(r.container_id, r.linux.cpuset_cpus) for r in after} == {
        (batch, node.cpus(batch)),
        (db, node.cpus(db)),
    }


def test_a_narrower_kernel_view_is_sent_again_quietly(
    make_node: NodeFactory, tmp_path: Path
) -> None:
    """The container may have pinned its own threads: not a repair, but the cpuset is
    sent again in case a widening was dropped (a no-op for a cgroup already right)."""
    node, batch, db = busy(make_node)
    kernel_agrees(node, tmp_path, db)
    one = str(CPUSet.parse(node.cpus(batch)).first())
    write_proc(tmp_path, pid_of(node, batch), one, node.mems(batch))
    counts = Counts()
    report = reconciler(node, tmp_path, counts).run_once()
    assert (report.repaired, report.resent) == ((), 1)


def test_containers_not_running_are_left_alone(make_node: NodeFactory, tmp_path: Path) -> None:
    node = make_node("xeon-2s-2numa", "inprocess")
    created = node.container(node.pod("later"), "later", start=False)
    counts = Counts()
    report = reconciler(node, tmp_path, counts).run_once()
    assert report.checked == 0 and not [
        r for r in node.calls("UpdateContainerResources") if r.container_id == created
    ]


def test_an_update_during_a_start_is_sent_again_after_it(make_node: NodeFactory) -> None:
    """containerd 1.6 applies an update that arrives while the container starts to its
    spec only. The agent sends it again once StartContainer has returned."""
    node = make_node("desktop-1s-4c-ht", "inprocess")
    batch = node.container(node.pod("batch"), "batch", start=False)
    gate = node.runtime.hold_next("StartContainer")
    starter = threading.Thread(target=node.kubelet.start_container, args=(batch,))
    starter.start()
    assert gate.entered.wait(5), "StartContainer never reached the runtime"
    _, db = node.guaranteed("db", 2)  # narrows batch while its start is in flight
    during = len([r for r in node.calls("UpdateContainerResources") if r.container_id == batch])
    assert during == 1
    gate.release.set()
    starter.join(5)
    sent = [r for r in node.calls("UpdateContainerResources") if r.container_id == batch]
    assert len(sent) == 2, "the update that overlapped the start was not sent again"
    assert sent[-1].linux.cpuset_cpus == node.cpus(batch)
    assert CPUSet.parse(node.cpus(batch)).isdisjoint(CPUSet.parse(node.cpus(db)))


def test_a_start_with_no_update_in_flight_sends_nothing(make_node: NodeFactory) -> None:
    node = make_node("desktop-1s-4c-ht", "inprocess")
    before = len(node.calls("UpdateContainerResources"))
    node.container(node.pod("batch"), "batch")
    assert len(node.calls("UpdateContainerResources")) == before


def test_the_reconcile_loop_runs_every_period(make_node: NodeFactory, tmp_path: Path) -> None:
    node, _, _ = busy(make_node)
    enough = threading.Event()

    class Waiting(Counts):
        def resent(self) -> None:
            super().resent()
            if self.resends >= 4:  # two passes over two containers
                enough.set()

    counts = Waiting()
    loop = Reconciler(
        node.agent, InProcessRuntimeAccess(node.runtime), 0.05, proc=tmp_path, observer=counts
    )
    loop.start()
    try:
        assert enough.wait(10), f"only {counts.resends} re-sends in 10 s at a 50 ms period"
    finally:
        loop.stop()


def test_a_period_of_zero_turns_it_off(make_node: NodeFactory, tmp_path: Path) -> None:
    node, _, _ = busy(make_node)
    loop = Reconciler(node.agent, InProcessRuntimeAccess(node.runtime), 0, proc=tmp_path)
    loop.start()
    assert loop._thread is None
    loop.stop()


def write_task(
    proc: Path, cgroups: Path, pid: int, cpus: str, mems: str, cgroup: str, children: str = ""
) -> None:
    """A process in the fake /proc: its allowed CPUs, its cgroup (v1 cpuset), its children."""
    write_proc(proc, pid, cpus, mems)
    (proc / str(pid) / "cgroup").write_text(f"12:memory:{cgroup}\n4:cpuset:{cgroup}\n")
    task = proc / str(pid) / "task" / str(pid)
    task.mkdir(parents=True, exist_ok=True)
    (task / "children").write_text(children)


def write_cgroup(cgroups: Path, cgroup: str, *tasks: int) -> None:
    path = cgroups / "cpuset" / cgroup.lstrip("/")
    path.mkdir(parents=True, exist_ok=True)
    (path / "tasks").write_text("".join(f"{t}\n" for t in tasks))


def cgroup_reconciler(node: Node, tmp_path: Path, counts: Counts) -> Reconciler:
    return Reconciler(
        node.agent,
        InProcessRuntimeAccess(node.runtime),
        60,
        proc=tmp_path / "proc",
        observer=counts,
        cgroup_root=tmp_path / "cgroup",
    )


def test_every_process_in_the_containers_cgroup_is_looked_at(
    make_node: NodeFactory, tmp_path: Path
) -> None:
    """The first process runs where it should; a second one in the container's cgroup
    does not: that is repaired, as the runtime can."""
    node, batch, db = busy(make_node)
    proc, cgroups = tmp_path / "proc", tmp_path / "cgroup"
    kernel_agrees(node, proc, db)
    first, second = pid_of(node, batch), 90001
    write_task(proc, cgroups, first, node.cpus(batch), node.mems(batch), "/pods/batch", "90001")
    write_task(proc, cgroups, second, "0-63", node.mems(batch), "/pods/batch")
    write_cgroup(cgroups, "/pods/batch", first, second)
    counts = Counts()
    report = cgroup_reconciler(node, tmp_path, counts).run_once()
    assert report.repaired == (batch,)
    assert counts.unrepairables == 0


def test_a_process_moved_out_of_its_containers_cgroup_is_reported_once_not_repaired(
    make_node: NodeFactory, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    node, batch, db = busy(make_node)
    proc, cgroups = tmp_path / "proc", tmp_path / "cgroup"
    kernel_agrees(node, proc, db)
    first, child = pid_of(node, batch), 90002
    write_task(proc, cgroups, first, node.cpus(batch), node.mems(batch), "/pods/batch", "90002")
    # The child was moved out (to the node's root cgroup) and runs anywhere.
    write_task(proc, cgroups, child, "0-63", "0-1", "/")
    write_cgroup(cgroups, "/pods/batch", first)
    counts = Counts()
    reconciler = cgroup_reconciler(node, tmp_path, counts)
    with caplog.at_level(logging.WARNING):
        for _ in range(3):
            report = reconciler.run_once()
            assert report.repaired == ()
    assert counts.unrepairables == 1
    assert reconciler.strays() == (f"{batch}: pid {child} in /",)
    warnings = [r for r in caplog.records if "has left the container's cgroup" in r.message]
    assert len(warnings) == 1 and batch in warnings[0].message


def test_a_first_process_moved_out_is_reported_not_repaired_every_period(
    make_node: NodeFactory, tmp_path: Path
) -> None:
    node, batch, db = busy(make_node)
    proc, cgroups = tmp_path / "proc", tmp_path / "cgroup"
    kernel_agrees(node, proc, db)
    first, worker = pid_of(node, batch), 90003
    write_task(proc, cgroups, first, node.cpus(batch), node.mems(batch), "/pods/batch", "90003")
    write_task(proc, cgroups, worker, node.cpus(batch), node.mems(batch), "/pods/batch")
    write_cgroup(cgroups, "/pods/batch", first, worker)
    counts = Counts()
    reconciler = cgroup_reconciler(node, tmp_path, counts)
    assert reconciler.run_once().repaired == ()
    # The first process is moved out of the container's cgroup and let run anywhere.
    write_task(proc, cgroups, first, "0-63", "0-1", "/elsewhere", "90003")
    write_cgroup(cgroups, "/pods/batch", worker)
    before = len(node.calls("UpdateContainerResources"))
    for _ in range(3):
        assert reconciler.run_once().repaired == ()
    assert len(node.calls("UpdateContainerResources")) == before
    assert counts.unrepairables == 1 and counts.repairs == 0
