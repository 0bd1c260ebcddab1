"""Held calls starve nobody in front of real containerd (root and containerd; skipped
on a developer machine without them, failed in CI): 70 long ExecSync calls (a
command running in a container; containerd 1.6 has no GetContainerEvents stream,
so the streams themselves are tested with the in-memory runtime in
test_starvation.py), 70 calls that never send their request, and then containerd
paused (SIGSTOP) with 70 pass-through and 70 hooked calls stuck in it. Meanwhile a
pass-through call while containerd runs, a CreateContainer the agent refuses on its
own and the status socket answer while those are held, and once containerd runs again
every stuck call completes."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest
from google.protobuf.internal import encoder

from agent.affinity import ANNOTATION_AFFINITY
from agent.config import AgentConfig
from agent.daemon import Daemon
from agent.introspect.client import fetch_status
from agent.introspect.server import status_socket_path
from agent.kubelet import kubelet_container_config
from agent.workload import QoSClass
from devtools.containerd import PrivateContainerd
from devtools.criclient import CRIClient, CRIError
from tests.e2e.conftest import Pods, containerd  # noqa: F401  (the session's containerd)
from tests.waiting import wait_until

pytestmark = [pytest.mark.root, pytest.mark.containerd]

RT = "/runtime.v1.RuntimeService/"
LONG = 70  # more than the 64 worker threads the relay once had for everything
EXEC_S = 30  # how long each held ExecSync runs in the container
SILENT = 70
STUCK = 70
# The limit for an answer: generous for a busy machine. "Not starved" is shown by
# what is still held when it comes (the long ExecSyncs, the calls stuck in a
# paused containerd), not by how fast it came.
ANSWER_S = 30.0


def all_stopped(pid: int) -> bool:
    """Whether every thread of `pid` is stopped (state T in /proc/<pid>/task/*/stat)."""
    states = []
    for stat in Path(f"/proc/{pid}/task").glob("*/stat"):
        try:
            text = stat.read_text()
        except OSError:
            continue  # the thread ended
        states.append(text.rpartition(")")[2].split()[0])
    return bool(states) and all(state in ("T", "t") for state in states)


@pytest.fixture
def agent(containerd: PrivateContainerd) -> Iterator[Daemon]:  # noqa: F811
    base = Path(tempfile.mkdtemp(prefix="numa-e2e-held-"))
    daemon = Daemon(
        AgentConfig(
            runtime_endpoint=containerd.endpoint,
            listen=f"unix://{base}/agent.sock",
            state_dir=str(base / "state"),
            feature_file="",  # never the host's NFD directory
        ),
        runtime_wait_s=10,
    )
    daemon.start()
    try:
        yield daemon
    finally:
        daemon.stop(0)
        shutil.rmtree(base, ignore_errors=True)


def _timed(seconds: float, call: Any) -> Any:
    """call()'s result, in a thread so a starved call cannot hang the test."""
    out: list[Any] = []
    worker = threading.Thread(target=lambda: out.append(call()), daemon=True)
    began = time.monotonic()
    worker.start()
    worker.join(seconds + 1)
    took = time.monotonic() - began
    assert out and took < seconds, f"no answer within {seconds} s (took {took:.1f} s)"
    return out[0]


def _exec_sync(container_id: str, *cmd: str, timeout_s: int) -> bytes:
    """An ExecSyncRequest (container_id=1, cmd=2, timeout=3); not in the proto subset."""
    out = b"\x0a" + encoder._VarintBytes(len(container_id)) + container_id.encode()
    for arg in cmd:
        out += b"\x12" + encoder._VarintBytes(len(arg)) + arg.encode()
    return out + b"\x18" + encoder._VarintBytes(timeout_s)


def test_held_calls_starve_nobody_on_containerd(
    containerd: PrivateContainerd,  # noqa: F811
    agent: Daemon,
) -> None:
    assert agent.relay is not None
    relay = agent.relay
    listen = agent.config.listen
    client = CRIClient(listen, timeout=30)
    pods = Pods(containerd, client=client)
    pod = pods.pod_config(
        "bad", qos=QoSClass.BURSTABLE, annotations={ANNOTATION_AFFINITY: "app: [[["}
    )
    sandbox = pods.run(pod)
    bad = kubelet_container_config(pod, "app", 100, image=containerd.image)
    ok_pod = pods.pod_config("busy", qos=QoSClass.BURSTABLE)
    ok_sandbox = pods.run(ok_pod)
    busy = pods.start_container(
        ok_sandbox,
        ok_pod,
        kubelet_container_config(
            ok_pod, "busy", 10, image=containerd.image, command=["/bin/sleep", "3600"]
        ),
    )

    def refused() -> grpc.StatusCode:
        try:
            with CRIClient(listen, timeout=ANSWER_S) as c:
                c.create_container(sandbox, bad, pod)
        except CRIError as err:
            return err.code
        return grpc.StatusCode.OK

    status_path = status_socket_path(listen)
    gate = threading.Event()
    held: list[Any] = []
    long_calls: list[Any] = []
    channel = grpc.insecure_channel(listen)
    paused = False
    try:
        sleep = _exec_sync(busy, "/bin/sleep", str(EXEC_S), timeout_s=EXEC_S + 30)
        for _ in range(LONG):
            long_calls.append(channel.unary_unary(RT + "ExecSync").future(sleep, timeout=120))
        wait_until(lambda: relay.in_flight()["passthrough"] >= LONG, 30, "the long calls held")

        def nothing() -> Iterator[bytes]:
            gate.wait(120)
            yield from ()

        for _ in range(SILENT):
            held.append(channel.stream_unary(RT + "Version").future(nothing(), timeout=120))
        assert _timed(ANSWER_S, lambda: client.version().runtime_name) == "containerd"
        assert _timed(ANSWER_S, refused) == grpc.StatusCode.INVALID_ARGUMENT
        # Both answered while every long ExecSync was still held: nobody waited for them.
        assert relay.in_flight()["passthrough"] >= LONG

        os.kill(containerd.pid or 0, signal.SIGSTOP)
        paused = True
        # SIGSTOP takes a thread when it next leaves the kernel: on a busy machine a
        # running thread can still answer for a moment. The calls are sent once the
        # kernel says every thread of containerd is stopped.
        wait_until(lambda: all_stopped(containerd.pid or 0), 30, "containerd to be stopped")
        stuck = [channel.unary_unary(RT + "Version").future(b"", timeout=120) for _ in range(STUCK)]
        stuck += [
            channel.unary_unary(RT + "ListContainers").future(b"", timeout=120)
            for _ in range(STUCK)
        ]
        # At least the STUCK Version calls (the long ExecSyncs may have ended by now
        # on a slow machine: they run EXEC_S seconds) and every ListContainers.
        wait_until(
            lambda: (
                relay.in_flight()["passthrough"] >= STUCK
                and relay.in_flight()["placement"] == STUCK
            ),
            30,
            "the calls to be stuck in containerd",
        )
        assert _timed(ANSWER_S, refused) == grpc.StatusCode.INVALID_ARGUMENT
        status = _timed(ANSWER_S, lambda: fetch_status(status_path, timeout=ANSWER_S))
        assert status["agent"]["pid"] == os.getpid()
        answered = [i for i, future in enumerate(stuck) if future.done()]
        assert not answered, f"answered while containerd was stopped: calls {answered}"

        os.kill(containerd.pid or 0, signal.SIGCONT)
        paused = False
        outcomes = []
        for future in stuck:
            try:
                future.result(60)
                outcomes.append("OK")
            except grpc.RpcError as err:
                outcomes.append(f"{err.code().name}: {err.details()}")
        assert outcomes == ["OK"] * len(stuck), sorted(set(outcomes))
    finally:
        if paused:
            os.kill(containerd.pid or 0, signal.SIGCONT)
        gate.set()
        for call in held:
            call.cancel()
        # containerd stops a pod only once its execs end: let them finish first
        # (cancelling would end the relay's calls, not the processes they run).
        give_up = time.monotonic() + EXEC_S + 60
        for call in long_calls:
            with contextlib.suppress(grpc.RpcError, grpc.FutureTimeoutError):
                call.result(max(give_up - time.monotonic(), 0))
        channel.close()
        with CRIClient(listen, timeout=120) as patient:
            cleanup = Pods(containerd, client=patient)
            cleanup.sandboxes.update(pods.sandboxes)
            cleanup.remove_all()
        client.close()
