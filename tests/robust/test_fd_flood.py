"""A flood of idle connections on the CRI socket takes every descriptor the agent
may open (its limit lowered with prlimit): the status socket still answers, from
descriptors held in reserve; no call is answered OK without its record; once the
flood ends, calls go through and are recorded."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import time

from agent.introspect.client import fetch_status
from agent.introspect.server import status_socket_path
from devtools.criclient import CRIError
from tests.robust.harness import RuntimeServer, Site, run_pod
from tests.robust.privileges import require_root

LIMIT = 200
FLOOD = 400


def _open_fds(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def test_the_status_socket_answers_and_no_answer_lacks_a_record_during_an_fd_flood(
    site: Site, runtime_server: RuntimeServer
) -> None:
    require_root("prlimit on another process")
    agent = site.start(runtime_server.endpoint)
    flood: list[socket.socket] = []
    try:
        pid = agent.proc.pid
        subprocess.run(["prlimit", f"--pid={pid}", f"--nofile={LIMIT}:{LIMIT}"], check=True)
        for _ in range(FLOOD):
            conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            conn.setblocking(False)
            with contextlib.suppress(BlockingIOError, ConnectionRefusedError, OSError):
                conn.connect(str(site.listen))
            flood.append(conn)
        deadline = time.monotonic() + 20
        while _open_fds(pid) < LIMIT - 2:
            assert time.monotonic() < deadline, f"the flood took only {_open_fds(pid)} fds"
            time.sleep(0.05)
        status = fetch_status(status_socket_path(f"unix://{site.listen}"), timeout=10)
        assert status["agent"]["pid"] == pid
        # A call now may not get through at all; one that is answered OK is recorded.
        answered: list[str] = []
        with agent.client(timeout=3) as client, contextlib.suppress(CRIError):
            answered.append(run_pod(client, "during")[0])
        for conn in flood:
            conn.close()
        flood.clear()
        with agent.client(timeout=30) as client:
            after, _ = run_pod(client, "after")
        saved = agent.state()["pods"]
        for sandbox in [*answered, after]:
            assert sandbox in saved, sandbox
    finally:
        for conn in flood:
            conn.close()
        code, stderr = agent.stop()
    assert code == 0, stderr[-3000:]
