"""No answer without a record, on real containerd: the state directory fills up (a
small tmpfs); RunPodSandbox and CreateContainer are refused with UNAVAILABLE
naming why, nothing running moves, and once space returns calls go through. A
restart in between keeps every placement (the last state written stands).
Needs root and containerd."""

from __future__ import annotations

import contextlib
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest

from agent.config import AgentConfig
from agent.daemon import Daemon
from agent.state.journal import saved_payload
from agent.workload import QoSClass
from devtools.containerd import PrivateContainerd
from devtools.criclient import CRIClient, CRIError
from tests.e2e.conftest import Pods
from tests.e2e.test_kernel_truth import create, kernel, settle

pytestmark = [pytest.mark.root, pytest.mark.containerd]


@pytest.fixture
def small_state_dir() -> Iterator[Path]:
    base = Path(tempfile.mkdtemp(prefix="numa-e2e-full-"))
    state = base / "state"
    state.mkdir(mode=0o700)
    subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=1m,mode=0700", "tmpfs", str(state)], check=True
    )
    try:
        yield state
    finally:
        subprocess.run(["umount", "-l", str(state)], check=False)
        subprocess.run(["rm", "-rf", str(base)], check=False)


def fill(directory: Path) -> Path:
    """Fill the file system under `directory`; returns the filler file."""
    filler = directory / "filler"
    with filler.open("wb") as out, contextlib.suppress(OSError):
        while True:
            out.write(b"\0" * 65536)
            out.flush()
    return filler


def start(containerd: PrivateContainerd, state: Path) -> tuple[Daemon, CRIClient, Pods]:
    daemon = Daemon(
        AgentConfig(
            runtime_endpoint=containerd.endpoint,
            listen=f"unix://{state.parent}/agent.sock",
            state_dir=str(state),
            feature_file="",
        ),
        runtime_wait_s=10,
    )
    daemon.start()
    client = CRIClient(daemon.config.listen)
    return daemon, client, Pods(containerd, client=client)


def test_a_full_state_directory_refuses_new_records_and_moves_nothing(
    containerd: PrivateContainerd, small_state_dir: Path
) -> None:
    daemon, client, pods = start(containerd, small_state_dir)
    try:
        _, db = create(pods, "db", QoSClass.GUARANTEED, 1000)
        pods.client.start_container(db)
        _, batch = create(pods, "batch", QoSClass.BESTEFFORT, 0)
        pods.client.start_container(batch)
        settle(daemon)
        before = {cid: kernel(containerd, cid) for cid in (db, batch)}
        filler = fill(small_state_dir)
        # The journal's last page may still take a line or two: every call answered OK
        # until the disk is really full must be in the state; then calls are refused.
        answered: list[str] = []
        for i in range(20):
            try:
                answered.append(create(pods, f"web{i}", QoSClass.BESTEFFORT, 0)[1])
            except CRIError as err:
                refused = err
                break
        else:
            raise AssertionError("a full state directory never refused a call")
        assert refused.code == grpc.StatusCode.UNAVAILABLE, refused
        assert "No space left on device" in refused.details, refused.details
        assert set(answered) <= set(saved_payload(small_state_dir)["containers"])
        assert {cid: kernel(containerd, cid) for cid in (db, batch)} == before
        assert "No space" in daemon.status()["agent"]["state_problem"]
        # A restart before space returns: the last state written stands, nothing moves.
        client.close()
        daemon.stop()
        daemon, client, pods2 = start(containerd, small_state_dir)
        pods2.sandboxes.update(pods.sandboxes)
        pods = pods2
        settle(daemon)
        assert {cid: kernel(containerd, cid) for cid in (db, batch)} == before
        placed = {p.container_id: p for p in daemon.node.placements()}  # type: ignore[union-attr]
        assert placed[db].exclusive and not placed[batch].exclusive
        filler.unlink()
        _, web = create(pods, "web2", QoSClass.BESTEFFORT, 0)  # space is back: recorded
        assert daemon.status()["agent"]["state_problem"] == ""
        assert web in {p.container_id for p in daemon.node.placements()}  # type: ignore[union-attr]
    finally:
        pods.remove_all()
        client.close()
        daemon.stop()
