"""Nothing that holds calls open starves the others (`numa-agent run`, the in-memory
runtime in its own process so that it can be paused like a stuck containerd):

- long-lived streams (GetContainerEvents, as kubelet's Evented PLEG and every
  `crictl events` hold one),
- callers that send a call's headers and never its request message,
- calls stuck in a paused runtime,

more of each than the relay once had worker threads (64), and meanwhile a
pass-through call, a placement (a hooked CreateContainer, placed or refused on
the agent's own) and the status socket each answer while those are held."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc
import pytest

from agent.affinity import ANNOTATION_AFFINITY
from agent.introspect.client import fetch_status
from agent.introspect.server import status_socket_path
from agent.kubelet import kubelet_container_config, kubelet_pod_config
from agent.workload import QoSClass
from devtools.criclient import CRIError
from tests.robust.harness import Agent, Site
from tests.waiting import wait_until

RT = "/runtime.v1.RuntimeService/"
HELD = 100  # more than the 64 worker threads the relay had for everything
# The limit for an answer, generous for a busy machine: what is held is held for
# 120 s (or until the paused runtime resumes), so an answer within this one did not
# wait for any of it. kubelet's own timeout is 2 minutes.
ANSWER_S = 30.0
READY_S = 30.0


@dataclass
class PausableRuntime:
    """The in-memory runtime in a process of its own, with enough threads for the
    streams the tests open (a real containerd has no such limit)."""

    path: Path
    proc: subprocess.Popen[bytes] | None = None

    @property
    def endpoint(self) -> str:
        return f"unix://{self.path}"

    def start(self) -> PausableRuntime:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "benchmarks.serve_memory", str(self.path), "600"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
        )
        assert self.proc.stdout is not None
        assert self.proc.stdout.readline() == b"ready\n"
        return self

    def pause(self) -> None:
        assert self.proc is not None
        os.kill(self.proc.pid, signal.SIGSTOP)

    def resume(self) -> None:
        assert self.proc is not None
        os.kill(self.proc.pid, signal.SIGCONT)

    def stop(self) -> None:
        if self.proc is None:
            return
        self.resume()
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


@pytest.fixture
def runtime(sockdir: Path) -> Iterator[PausableRuntime]:
    rt = PausableRuntime(sockdir / "rt.sock").start()
    yield rt
    rt.stop()


@pytest.fixture
def agent(site: Site, runtime: PausableRuntime) -> Iterator[Agent]:
    running = site.start(runtime.endpoint)
    yield running
    code, stderr = running.stop()
    assert code == 0, stderr[-3000:]


@dataclass
class Holders:
    """Calls a test holds open; all let go (and waited for) afterwards."""

    channel: grpc.Channel
    gate: threading.Event = field(default_factory=threading.Event)
    streams: list[Any] = field(default_factory=list)
    pending: list[Future[Any]] = field(default_factory=list)

    def stream(self) -> None:
        """A GetContainerEvents stream, open once its first event arrived."""
        call = self.channel.unary_stream(RT + "GetContainerEvents")(b"", timeout=120)
        self.streams.append(call)
        next(call)

    def silent(self, method: str) -> None:
        """A call that sends its headers and then nothing until released."""

        def no_request_yet() -> Iterator[bytes]:
            self.gate.wait(120)
            yield from ()

        self.pending.append(self.channel.stream_unary(method).future(no_request_yet(), timeout=120))

    def unary(self, method: str, request: bytes = b"") -> None:
        self.pending.append(self.channel.unary_unary(method).future(request, timeout=120))

    def release(self) -> None:
        self.gate.set()
        for call in self.streams:
            call.cancel()
        for future in self.pending:
            future.cancel()


@pytest.fixture
def holders(agent: Agent) -> Iterator[Holders]:
    with grpc.insecure_channel(f"unix://{agent.listen}") as channel:
        held = Holders(channel)
        try:
            yield held
        finally:
            held.release()


def _bad_pod(name: str) -> Any:
    return kubelet_pod_config(
        name, "default", f"uid-{name}", {}, {ANNOTATION_AFFINITY: "app: [[["}, QoSClass.BURSTABLE
    )


def answers_within(seconds: float, call: Callable[[], object]) -> object:
    """`call()`'s result; fails if it takes longer than `seconds` (it runs in a thread
    so that a starved call cannot hang the test)."""
    with ThreadPoolExecutor(1) as pool:
        began = time.monotonic()
        future = pool.submit(call)
        try:
            result = future.result(seconds + 1)
        except TimeoutError:
            raise AssertionError(f"no answer within {seconds} s") from None
        took = time.monotonic() - began
    assert took < seconds, f"answered after {took:.1f} s"
    return result


@dataclass(frozen=True)
class BadPod:
    """A pod whose affinity annotation is broken: its creates are refused by the agent
    itself (INVALID_ARGUMENT) without a runtime call."""

    sandbox: str
    config: Any


@pytest.fixture
def bad_pod(agent: Agent) -> BadPod:
    """Made before anything is held, with one good container next to it so that
    every events stream has an event to send at once."""
    with agent.client(timeout=10) as client:
        pod = kubelet_pod_config(
            "bad", "default", "uid-bad", {}, {ANNOTATION_AFFINITY: "app: [[["}, QoSClass.BURSTABLE
        )
        bad = BadPod(client.run_pod_sandbox(pod), pod)
        ok = kubelet_pod_config("ok", "default", "uid-ok")
        sandbox = client.run_pod_sandbox(ok)
        client.create_container(sandbox, kubelet_container_config(ok, "app"), ok)
    return bad


def check_everyone_answers(agent: Agent, bad: BadPod, *, runtime_paused: bool = False) -> None:
    """Pass-through (unless the runtime is paused: then it cannot answer), a placement
    refused on the agent's own, and the status socket: each within ANSWER_S."""
    with agent.client(timeout=ANSWER_S) as client:
        if not runtime_paused:
            answers_within(ANSWER_S, client.version)
        config = kubelet_container_config(bad.config, "app", 100)

        def refused_create() -> grpc.StatusCode:
            try:
                client.create_container(bad.sandbox, config, bad.config)
            except CRIError as err:
                return err.code
            return grpc.StatusCode.OK

        assert answers_within(ANSWER_S, refused_create) == grpc.StatusCode.INVALID_ARGUMENT
    status = answers_within(
        ANSWER_S, lambda: fetch_status(status_socket_path(str(agent.listen)), timeout=ANSWER_S)
    )
    assert isinstance(status, dict) and status["agent"]["pid"] == agent.proc.pid


def test_open_event_streams_starve_nobody(agent: Agent, bad_pod: BadPod, holders: Holders) -> None:
    for _ in range(HELD):
        answers_within(ANSWER_S, holders.stream)  # the 65th once waited for a free thread
    check_everyone_answers(agent, bad_pod)
    # And a placement that the runtime carries out.
    with agent.client(timeout=ANSWER_S) as client:
        pod = kubelet_pod_config("fine", "default", "uid-fine")
        sandbox = answers_within(ANSWER_S, lambda: client.run_pod_sandbox(pod))
        config = kubelet_container_config(pod, "app", 100)
        cid = answers_within(ANSWER_S, lambda: client.create_container(sandbox, config, pod))
        assert isinstance(cid, str) and cid


@pytest.mark.parametrize("method", [RT + "Version", RT + "CreateContainer"])
def test_callers_that_never_send_their_request_starve_nobody(
    agent: Agent, bad_pod: BadPod, holders: Holders, method: str
) -> None:
    for _ in range(HELD):
        holders.silent(method)
    # Same connection, so the relay has seen every silent call before the checks.
    answers_within(
        ANSWER_S, lambda: holders.channel.unary_unary(RT + "Version")(b"", timeout=ANSWER_S)
    )
    check_everyone_answers(agent, bad_pod)


def test_calls_stuck_in_a_paused_runtime_starve_nobody(
    agent: Agent, bad_pod: BadPod, holders: Holders, runtime: PausableRuntime
) -> None:
    runtime.pause()
    try:
        for _ in range(70):
            holders.unary(RT + "Version")  # pass-through, stuck in the runtime
            holders.unary(RT + "ListContainers")  # hooked, stuck in the runtime
        check_everyone_answers(agent, bad_pod, runtime_paused=True)
    finally:
        runtime.resume()
    # Once the runtime answers again, every stuck call completes.
    wait_until(
        lambda: all(f.done() for f in holders.pending), READY_S, "the stuck calls to complete"
    )
    assert all(f.exception() is None for f in holders.pending)
