"""The in-memory runtime as the tests need it: served over gRPC on a unix socket,
every call recorded as it arrived, and the next call of a method failed or held.

Development only. The product's `MemoryRuntime` (behind `simulate`) has none of
this; `FaultyRuntime` adds it by wrapping `MemoryRuntime.call`, the one way in for
calls served here and for in-process ones (`agent.runtime.inprocess.dispatch`).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent import futures
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc

from agent.relay.endpoint import Endpoint
from agent.runtime.memory import (
    IMAGE_METHODS,
    RUNTIME_METHODS,
    CallRefused,
    MemoryRuntime,
    Metadata,
)
from proto import cri_pb2, cri_pb2_grpc


@dataclass(frozen=True, slots=True)
class CallRecord:
    """One call the runtime was asked to serve: what the relay (or agent) actually sent.
    In-process calls have no metadata and no deadline."""

    method: str
    request: Any
    metadata: Metadata
    time_remaining: float | None


@dataclass(frozen=True, slots=True)
class Gate:
    """A call held inside the runtime: `entered` is set when it arrives, and it
    proceeds once `release` is set (a slow runtime, for tests of calls in flight)."""

    entered: threading.Event = field(default_factory=threading.Event)
    release: threading.Event = field(default_factory=threading.Event)


class FaultyRuntime(MemoryRuntime):
    """A MemoryRuntime that records every call and fails or holds the next call of
    a method when a test asked. Direct method calls (a test reading the runtime's
    state) are neither recorded nor failed."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[CallRecord] = []
        # Methods of gRPC calls whose caller went (cancelled, or its deadline passed)
        # before the runtime answered: what a relay that lets go looks like from here.
        self.cancelled: list[str] = []
        self._faults_lock = threading.Lock()
        self._failures: dict[str, list[CallRefused]] = {}
        self._gates: dict[str, list[Gate]] = {}

    def fail_next(
        self,
        method: str,
        code: grpc.StatusCode,
        details: str = "injected failure",
        trailing_metadata: Metadata = (),
    ) -> None:
        """Make the next call of `method` (e.g. "CreateContainer") fail with `code`."""
        with self._faults_lock:
            self._failures.setdefault(method, []).append(
                CallRefused(code, details, trailing_metadata)
            )

    def hold_next(self, method: str) -> Gate:
        """Hold the next call of `method` until the returned gate is released."""
        gate = Gate()
        with self._faults_lock:
            self._gates.setdefault(method, []).append(gate)
        return gate

    def arrive(
        self,
        method: str,
        request: Any,
        metadata: Metadata = (),
        time_remaining: float | None = None,
    ) -> None:
        """Record a call, then hold it and fail it if a test asked for that."""
        with self._faults_lock:
            self.calls.append(CallRecord(method, request, metadata, time_remaining))
            failures = self._failures.get(method)
            failure = failures.pop(0) if failures else None
            gates = self._gates.get(method)
            gate = gates.pop(0) if gates else None
        if gate is not None:
            gate.entered.set()
            gate.release.wait()
        if failure is not None:
            raise failure

    def note_cancelled(self, method: str) -> None:
        with self._faults_lock:
            self.cancelled.append(method)

    def call(
        self,
        method: str,
        request: Any,
        metadata: Metadata = (),
        time_remaining: float | None = None,
    ) -> Any:
        self.arrive(method, request, metadata, time_remaining)
        return super().call(method, request)


# --------------------------------------------------------------------------- gRPC serving


def _unary(runtime: FaultyRuntime, method: str) -> Callable[[Any, grpc.ServicerContext], Any]:
    def handle(request: Any, context: grpc.ServicerContext) -> Any:
        answered = threading.Event()

        def on_done() -> None:  # the call ended: by our answer, or its caller went first
            if not answered.is_set():
                runtime.note_cancelled(method)

        context.add_callback(on_done)
        try:
            return runtime.call(
                method, request, tuple(context.invocation_metadata()), context.time_remaining()
            )
        except CallRefused as refused:
            context.set_trailing_metadata(refused.trailing_metadata)
            context.abort(refused.code, refused.details)
        finally:
            answered.set()

    return handle


class _RuntimeServicer(cri_pb2_grpc.RuntimeServiceServicer):
    def __init__(self, runtime: FaultyRuntime) -> None:
        self._runtime = runtime
        for rpc in RUNTIME_METHODS:
            setattr(self, rpc, _unary(runtime, rpc))

    def GetContainerEvents(
        self, request: cri_pb2.GetEventsRequest, context: grpc.ServicerContext
    ) -> Iterator[cri_pb2.ContainerEventResponse]:
        runtime = self._runtime
        cancelled = threading.Event()
        ended = threading.Event()  # by the runtime (a refusal), not by the caller

        def on_done() -> None:
            if not ended.is_set():
                runtime.note_cancelled("GetContainerEvents")
            cancelled.set()
            runtime.wake_event_streams()

        context.add_callback(on_done)
        try:
            runtime.arrive(
                "GetContainerEvents",
                request,
                tuple(context.invocation_metadata()),
                context.time_remaining(),
            )
        except CallRefused as refused:
            ended.set()
            context.set_trailing_metadata(refused.trailing_metadata)
            context.abort(refused.code, refused.details)
        yield from runtime.get_container_events(request, cancelled)


class _ImageServicer(cri_pb2_grpc.ImageServiceServicer):
    def __init__(self, runtime: FaultyRuntime) -> None:
        for rpc in IMAGE_METHODS:
            setattr(self, rpc, _unary(runtime, rpc))


def serve_memory_runtime(
    path: str | Path,
    runtime: FaultyRuntime | None = None,
    extra_handlers: Sequence[grpc.GenericRpcHandler] = (),
    max_workers: int = 16,
) -> tuple[grpc.Server, FaultyRuntime]:
    """Serve `runtime` (a new one if None) on the unix socket `path`; started.

    `extra_handlers` lets a test add methods the runtime does not implement
    (a CRI method from the future). Stop the server with `server.stop(grace)`.
    """
    runtime = runtime or FaultyRuntime()
    endpoint = Endpoint.parse(str(path))
    endpoint.path.parent.mkdir(parents=True, exist_ok=True)
    if endpoint.path.exists():
        os.unlink(endpoint.path)
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=max_workers))
    cri_pb2_grpc.add_RuntimeServiceServicer_to_server(_RuntimeServicer(runtime), server)  # type: ignore[no-untyped-call]
    cri_pb2_grpc.add_ImageServiceServicer_to_server(_ImageServicer(runtime), server)  # type: ignore[no-untyped-call]
    handlers: Iterable[grpc.GenericRpcHandler] = extra_handlers
    server.add_generic_rpc_handlers(tuple(handlers))
    server.add_insecure_port(endpoint.target)
    server.start()
    return server, runtime
