"""Worker starvation: what held calls do to everyone else's latency.

The daemon (`numa-agent run`'s, in its own process) in front of the in-memory
runtime (its own process, with threads enough for every stream). Measured twice,
idle and while the agent holds 200 open GetContainerEvents streams and 100 calls
that sent their headers but never their request: pass-through latency (Version),
placement latency (CreateContainer, a hooked call that places the container) and
the status socket's latency, p50/p99, and how many of them failed or timed out
(deadline ANSWER_S). Also the agent's threads and RSS while holding.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc

from agent.introspect.client import StatusError, fetch_status
from agent.introspect.server import status_socket_path
from agent.kubelet import kubelet_container_config, kubelet_pod_config
from agent.workload import QoSClass
from benchmarks.relay_bench import PY, Process, percentile, scratch
from devtools.criclient import CRIClient, CRIError
from devtools.fakesysfs import write_shape

STREAMS = 200
SILENT = 100
ANSWER_S = 5.0
QUIET_S = 3.0
EVENTS = "/runtime.v1.RuntimeService/GetContainerEvents"
VERSION = "/runtime.v1.RuntimeService/Version"


@dataclass(frozen=True, slots=True)
class Plan:
    streams: int = STREAMS
    silent: int = SILENT
    calls: int = 300  # Version and status calls per phase
    creates: int = 60  # CreateContainer calls per phase


QUICK = Plan(streams=20, silent=10, calls=20, creates=5)


def _ms(values: list[float], q: float) -> float | None:
    return round(percentile(sorted(values), q) * 1000, 3) if values else None


GIVE_UP_AFTER = 3  # failures in a row: the kind is starved; measuring on only waits


def _measure(call: Callable[[], object], count: int) -> dict[str, Any]:
    took: list[float] = []
    failed = in_a_row = 0
    for _ in range(count):
        began = time.perf_counter()
        try:
            call()
        except (grpc.RpcError, CRIError, StatusError):
            failed += 1
            in_a_row += 1
            if in_a_row == GIVE_UP_AFTER:
                break
            continue
        in_a_row = 0
        took.append(time.perf_counter() - began)
    return {
        "p50_ms": _ms(took, 0.5),
        "p99_ms": _ms(took, 0.99),
        "answered": len(took),
        "failed": failed,
        "starved": in_a_row == GIVE_UP_AFTER,
    }


class _Held:
    """The streams and silent calls held open on one channel; released by `close`."""

    def __init__(self, channel: grpc.Channel) -> None:
        self.channel = channel
        self.gate = threading.Event()
        self.calls: list[Any] = []
        self.opened = 0
        self._lock = threading.Lock()

    def open_streams(self, count: int) -> float:
        """Open `count` streams; each is open once its first event arrived. Waits for
        them at most ANSWER_S plus 20 ms a stream; returns the seconds it took."""
        began = time.monotonic()
        waiters = []
        for _ in range(count):
            call = self.channel.unary_stream(EVENTS)(b"", timeout=600)
            self.calls.append(call)
            waiter = threading.Thread(target=self._first, args=(call,), daemon=True)
            waiter.start()
            waiters.append(waiter)
        deadline = began + ANSWER_S + 0.02 * count
        for waiter in waiters:
            waiter.join(max(deadline - time.monotonic(), 0))
        return time.monotonic() - began

    def _first(self, call: Any) -> None:
        try:
            next(call)
            with self._lock:
                self.opened += 1
        except (grpc.RpcError, StopIteration):
            pass

    def hold_silent(self, count: int) -> None:
        def nothing() -> Iterator[bytes]:
            self.gate.wait(600)
            yield from ()

        for _ in range(count):
            self.calls.append(self.channel.stream_unary(VERSION).future(nothing(), timeout=600))

    def close(self) -> None:
        self.gate.set()
        for call in self.calls:
            call.cancel()


def _phase(agent: Process, listen: Path, sandboxes: Iterator[tuple[str, Any]], plan: Plan) -> Any:
    status = status_socket_path(str(listen))
    out: dict[str, Any] = {}
    with CRIClient(str(listen), timeout=ANSWER_S) as client:
        out["pass_through"] = _measure(client.version, plan.calls)

        def create() -> None:
            sandbox, pod = next(sandboxes)
            config = kubelet_container_config(pod, "app", 10)
            client.create_container(sandbox, config, pod)

        out["placement"] = _measure(create, plan.creates)
    out["status"] = _measure(lambda: fetch_status(status, timeout=ANSWER_S), plan.calls // 10)
    # What holding costs when nothing happens: the agent's CPU over a quiet window.
    cpu0 = agent.cpu()
    time.sleep(QUIET_S)
    out["agent_cpu_quiet_pct"] = round((agent.cpu() - cpu0) / QUIET_S * 100, 1)
    out["agent_threads"] = agent.ps.num_threads()
    out["agent_rss_mib"] = round(agent.rss_mib(), 1)
    return out


def measure(base: Path, plan: Plan) -> dict[str, Any]:
    runtime_sock = base / "rt.sock"
    runtime = Process(
        [PY, "-m", "benchmarks.serve_memory", str(runtime_sock), str(plan.streams + 100)],
        runtime_sock,
        base / "rt.log",
    )
    sysfs = write_shape("xeon-2s-2numa", base / "sysfs")
    listen = base / "agent" / "agent.sock"
    argv = [PY, "-m", "benchmarks.serve_agent", f"unix://{runtime_sock}", str(listen)]
    agent = Process(
        [*argv, str(base / "state"), str(sysfs)],
        listen,
        base / "agent.log",
        status_socket_path(str(listen)).exists,  # measured too: wait for it
    )
    try:
        with CRIClient(str(listen), timeout=30) as setup:
            pods = []
            for i in range(2 * plan.creates + 1):
                pod = kubelet_pod_config(
                    f"p{i}", "bench", str(uuid.uuid4()), qos=QoSClass.BURSTABLE
                )
                pods.append((setup.run_pod_sandbox(pod), pod))
            # One container, so every events stream has an event to send at once.
            sandbox, pod = pods.pop()
            setup.create_container(sandbox, kubelet_container_config(pod, "app", 10), pod)
        sandboxes = iter(pods)
        result: dict[str, Any] = {"streams": plan.streams, "silent": plan.silent}
        result["idle"] = _phase(agent, listen, sandboxes, plan)
        with grpc.insecure_channel(f"unix://{listen}") as channel:
            held = _Held(channel)
            try:
                result["streams_open_s"] = round(held.open_streams(plan.streams), 2)
                result["streams_opened"] = held.opened
                held.hold_silent(plan.silent)
                result["holding"] = _phase(agent, listen, sandboxes, plan)
            finally:
                held.close()
        return result
    finally:
        agent.stop()
        runtime.stop()


def evaluate(plan: Plan = Plan()) -> dict[str, Any]:
    with scratch() as base:
        return measure(base, plan)


def table(result: dict[str, Any]) -> str:
    from benchmarks.report import table as md

    rows = []
    for kind in ("pass_through", "placement", "status"):
        idle, held = result["idle"][kind], result["holding"][kind]
        rows.append(
            (
                kind.replace("_", "-"),
                idle["p50_ms"],
                idle["p99_ms"],
                held["p50_ms"],
                held["p99_ms"],
                f"{held['failed']}{' (gave up)' if held['starved'] else ''}",
            )
        )
    text = md(("call", "idle p50", "idle p99", "held p50", "held p99", "held failed"), rows)
    return (
        f"{text}\n{result['streams_opened']} of {result['streams']} streams opened in "
        f"{result['streams_open_s']} s, {result['silent']} silent callers; agent "
        f"{result['holding']['agent_threads']} threads, {result['holding']['agent_rss_mib']} "
        f"MiB, {result['holding']['agent_cpu_quiet_pct']}% CPU when quiet while holding "
        f"({result['idle']['agent_threads']} threads, {result['idle']['agent_rss_mib']} MiB, "
        f"{result['idle']['agent_cpu_quiet_pct']}% idle)"
    )


if __name__ == "__main__":
    import json
    import sys

    res = evaluate(QUICK if "--quick" in sys.argv else Plan())
    print(table(res))
    print(json.dumps(res, indent=1))
