"""What callers inventing method names cost the agent: `numa-agent run`'s daemon in
its own process (metrics on) in front of the in-memory runtime; N calls, each on a
method name never used before, relayed (the runtime answers UNIMPLEMENTED). Reports
the agent's RSS before and after, and the size of its /metrics page."""

from __future__ import annotations

import itertools
import socket
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import grpc

from benchmarks.relay_bench import PY, Process, scratch
from devtools.fakesysfs import write_shape

NAMES = 20_000
QUICK_NAMES = 200
CONCURRENCY = 8


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _listening(port: int) -> bool:
    """The agent's metrics endpoint accepts connections (it opens it last)."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=5):
            return True
    except OSError:
        return False


def metrics_bytes(port: int) -> int:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=30) as reply:
        return len(reply.read())


@dataclass(frozen=True, slots=True)
class Result:
    names: int
    seconds: float
    rss_before_mib: float
    rss_after_mib: float
    metrics_before_bytes: int
    metrics_after_bytes: int

    def as_dict(self) -> dict[str, object]:
        return {
            "names": self.names,
            "seconds": round(self.seconds, 1),
            "rss_before_mib": round(self.rss_before_mib, 1),
            "rss_after_mib": round(self.rss_after_mib, 1),
            "metrics_before_bytes": self.metrics_before_bytes,
            "metrics_after_bytes": self.metrics_after_bytes,
        }


def evaluate(names: int = NAMES) -> dict[str, object]:
    with scratch() as base:
        runtime_sock = base / "rt.sock"
        runtime = Process(
            [PY, "-m", "benchmarks.serve_memory", str(runtime_sock)], runtime_sock, base / "rt.log"
        )
        try:
            return measure(base, runtime_sock, names).as_dict()
        finally:
            runtime.stop()


def measure(base: Path, runtime_sock: Path, names: int) -> Result:
    sysfs = write_shape("desktop-1s-4c-ht", base / "sysfs")
    listen = base / "agent.sock"
    port = _free_port()
    argv = [PY, "-m", "benchmarks.serve_agent", f"unix://{runtime_sock}", str(listen)]
    agent = Process(
        [*argv, str(base / "state"), str(sysfs), f"127.0.0.1:{port}"],
        listen,
        base / "agent.log",
        lambda: _listening(port),
    )
    try:
        with grpc.insecure_channel(f"unix://{listen}") as channel:
            version = channel.unary_unary("/runtime.v1.RuntimeService/Version")
            version(b"", timeout=10)
            rss_before = agent.rss_mib()
            metrics_before = metrics_bytes(port)
            counter = itertools.count()

            def caller() -> None:
                while (i := next(counter)) < names:
                    method = f"/runtime.v1.RuntimeService/Invented{i:06d}"
                    try:
                        channel.unary_unary(method)(b"", timeout=10)
                    except grpc.RpcError as err:
                        if err.code() != grpc.StatusCode.UNIMPLEMENTED:
                            raise

            began = time.monotonic()
            with ThreadPoolExecutor(CONCURRENCY) as pool:
                for f in [pool.submit(caller) for _ in range(CONCURRENCY)]:
                    f.result()
            seconds = time.monotonic() - began
            version(b"", timeout=10)
            return Result(
                names,
                seconds,
                rss_before,
                agent.rss_mib(),
                metrics_before,
                metrics_bytes(port),
            )
    finally:
        agent.stop()


def summary(result: dict[str, object]) -> str:
    return (
        f"{result['names']} distinct unknown method names relayed in {result['seconds']} s: "
        f"agent RSS {result['rss_before_mib']} -> {result['rss_after_mib']} MiB, "
        f"/metrics {result['metrics_before_bytes']} -> {result['metrics_after_bytes']} bytes"
    )


if __name__ == "__main__":
    import json
    import sys

    print(json.dumps(evaluate(int(sys.argv[1]) if len(sys.argv) > 1 else NAMES), indent=1))
