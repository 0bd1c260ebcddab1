"""`numa-agent run` on a hostile or broken state directory: whatever is found there
(a deeply nested document, a FIFO, a file of hundreds of MiB, symlinks planted as
its files, a read-only directory) the agent starts, serves kubelet and says why;
it never exits, hangs or reads without bound."""

from __future__ import annotations

import os
import socket
import urllib.request
from collections.abc import Callable
from pathlib import Path

import grpc
import pytest

from agent.introspect.client import fetch_status
from agent.introspect.server import status_socket_path
from devtools.criclient import CRIError
from proto import cri_pb2
from tests.robust.harness import RuntimeServer, Site, create, run_pod
from tests.robust.privileges import read_only

VICTIM_TEXT = b"root's precious file\n"


def _nested(state: Path, _victim: Path) -> None:
    (state / "state.json").write_bytes(b"[" * 100_000 + b"]" * 100_000)


def _fifo(state: Path, _victim: Path) -> None:
    os.mkfifo(state / "state.json", 0o600)


def _huge(state: Path, _victim: Path) -> None:
    # 300 MiB of JSON whitespace around a valid document: what a runaway state
    # (or a hostile one) looks like; the old agent read and parsed all of it.
    with (state / "state.json").open("wb") as f:
        f.write(b"{}")
        f.truncate(300 << 20)


def _symlinks(state: Path, victim: Path) -> None:
    # The temporary file's name holds the agent's pid, unknown here: the store's own
    # tests plant that one (tests/state/test_store_hostile.py).
    for name in ("state.json", "lock"):
        (state / name).symlink_to(victim)


BROKEN: list[tuple[str, Callable[[Path, Path], None], str]] = [
    ("nested", _nested, "nested too deeply"),
    ("fifo", _fifo, "not a regular file"),
    ("huge", _huge, "over the limit of"),
    ("symlinks", _symlinks, "symbolic link"),
]


def _peak_rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmHWM in /proc/pid/status")


@pytest.mark.parametrize(("kind", "make", "reason"), BROKEN, ids=[b[0] for b in BROKEN])
def test_agent_serves_whatever_the_state_directory_holds(
    site: Site,
    runtime_server: RuntimeServer,
    kind: str,
    make: Callable[[Path, Path], None],
    reason: str,
) -> None:
    site.state_dir.mkdir(mode=0o700)
    victim = site.base / "victim"
    victim.write_bytes(VICTIM_TEXT)
    make(site.state_dir, victim)
    agent = site.start(runtime_server.endpoint)  # READY=1, or the harness fails
    try:
        with agent.client() as client:
            sandbox, pod = run_pod(client, "db")
            create(client, sandbox, pod, "db", 2)
        # The unit's MemoryMax is 512M; the old agent peaked at the file's size and more.
        assert _peak_rss_mib(agent.proc.pid) < 200, kind
    finally:
        code, stderr = agent.stop()
    assert code == 0, stderr
    assert reason in stderr, (kind, stderr[-3000:])
    assert victim.read_bytes() == VICTIM_TEXT
    assert sorted(site.state_dir.glob("state.json.rejected-*")), kind
    # The state written after the start is a real file again, and it is usable.
    assert not (site.state_dir / "state.json").is_symlink()
    assert agent.state()["containers"], kind


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def test_read_only_state_directory_refuses_new_records_until_writable_again(
    site: Site, runtime_server: RuntimeServer
) -> None:
    """No answer without a record: while the state cannot be written, RunPodSandbox
    and CreateContainer are refused with UNAVAILABLE naming why, what runs stays
    where it is, status says why, and once the directory is writable calls go through."""
    first = site.start(runtime_server.endpoint)
    with first.client() as client:
        sandbox, pod = run_pod(client, "db")
        db = create(client, sandbox, pod, "db", 2)
    assert first.stop()[0] == 0  # a state file and a lock file exist, as on a real node
    port = _free_port()
    with read_only(site.state_dir):
        agent = site.start(
            runtime_server.endpoint, extra=("--metrics-address", f"127.0.0.1:{port}")
        )
        try:
            with agent.client() as client:
                with pytest.raises(CRIError) as refused_pod:
                    run_pod(client, "web")
                with pytest.raises(CRIError) as refused_create:
                    create(client, sandbox, pod, "sidecar", 0)
                held = {c.id: c.state for c in client.list_containers()}
            status = fetch_status(status_socket_path(f"unix://{site.listen}"), timeout=5)
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as reply:
                metrics = reply.read().decode()
        except BaseException:
            agent.stop()
            raise
    # Writable again: the next call that needs a record writes it and goes through.
    try:
        with agent.client() as client:
            run_pod(client, "web")
    finally:
        code, stderr = agent.stop()
    for refused in (refused_pod.value, refused_create.value):
        assert refused.code == grpc.StatusCode.UNAVAILABLE, refused
        assert "Read-only file system" in refused.details and "cannot record" in refused.details
    assert held == {db: cri_pb2.CONTAINER_RUNNING}
    assert "Read-only file system" in status["agent"]["state_problem"]
    assert code == 0, stderr
    assert "cannot write state file" in stderr, stderr[-3000:]
    assert "can be written again" in stderr, stderr[-3000:]
    failures = [
        line for line in metrics.splitlines() if line.startswith("numa_agent_state_write_failures")
    ]
    assert failures and float(failures[0].split()[-1]) >= 1, failures
    pods = {p["name"] for p in agent.state()["pods"].values()}
    assert pods == {"db", "web"}
