"""The relay server: every CRI call on the agent's socket goes to the runtime.

One generic handler serves any `/service/method` path, as raw bytes, so CRI
methods the agent has never heard of still work. A method listed in `hooks`
is handed to its hook, which decides what reaches the runtime.

Calls that stay open must not starve the others (issue 12): every call gets a
thread of its own at once (pool.py), and limits.py caps each kind of call
(pass-through, placement, stream, and callers still to send their request)
separately, refusing the excess of one kind with RESOURCE_EXHAUSTED. Handlers
are registered as request-streaming so that the relay, not grpc, reads the
request message: a call that never sends it is then visible and can be let go.
The server stays grpc's synchronous one, which relays a pass-through call with
fewer thread hops than grpc.aio (measured: benchmarks/starvation_bench.py).
A caller that goes away takes its runtime call with it (cancelled there too), so
its thread and its slot are free at once; its deadline is passed on to the runtime.
"""

from __future__ import annotations

import logging
import shutil
import time
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import grpc

from agent.relay import listen
from agent.relay.backend import Backend, BackendError, Reply, passable, remaining
from agent.relay.budget import MAX_REQUEST_BYTES, ByteBudget
from agent.relay.endpoint import Endpoint
from agent.relay.hooks import Hook, HookAbort
from agent.relay.limits import KindLimit, Limits, WaitingRoom
from agent.relay.methods import KNOWN_METHODS, QUICK_METHODS, STREAMING_METHODS
from agent.relay.pool import ElasticExecutor
from agent.relay.streams import StreamCancelled

log = logging.getLogger(__name__)

# Told of every call once it ends: (full method name, status code, seconds). Metrics.
CallObserver = Callable[[str, grpc.StatusCode, float], None]

# Calls refused by a limit in the very moment others finish hold a thread briefly
# beyond Limits.total; this much slack keeps them from being refused by grpc instead.
_SLACK = 16
DEFAULT_LIMITS = Limits()
# A connection with no call in flight for this long is closed (GOAWAY; a gRPC client
# reconnects by itself when it next calls): idle connections cannot pile up and
# take the descriptors the agent needs. kubelet calls about every second.
IDLE_CONNECTION_S = 60.0


def _abort(context: grpc.ServicerContext, err: BackendError) -> None:
    context.set_trailing_metadata(err.trailing_metadata)
    context.abort(err.code, err.details)


def _final_code(context: grpc.ServicerContext) -> grpc.StatusCode:
    """The status a call that raised ended with, for the observer."""
    code: grpc.StatusCode | None = context.code()  # set by abort
    if code is not None:
        return code
    # A call cancelled under the relay (the caller went, or it was pushed out of the
    # waiting room) ends with no code of ours; anything else escaping is UNKNOWN.
    return grpc.StatusCode.UNKNOWN if context.is_active() else grpc.StatusCode.CANCELLED


class _Dispatcher(grpc.GenericRpcHandler):  # type: ignore[misc]
    def __init__(
        self,
        backend: Backend,
        hooks: Mapping[str, Hook],
        observer: CallObserver | None = None,
        limits: Limits = DEFAULT_LIMITS,
    ) -> None:
        self._backend = backend
        self._hooks = hooks
        self._observer = observer
        self._handlers: dict[str, Any] = {}
        self.waiting = WaitingRoom(limits.waiting)
        self.passthrough = KindLimit("pass-through", limits.passthrough)
        self.placement = KindLimit("placement", limits.placement)
        self.streams = KindLimit("stream", limits.streams)
        self.budget = ByteBudget()

    def service(self, handler_call_details: grpc.HandlerCallDetails) -> Any:
        method: str = handler_call_details.method
        handler = self._handlers.get(method)
        if handler is None:
            handler = self._handler(method)
            if method in KNOWN_METHODS:
                # Unknown names are made per call: a caller inventing names must not
                # grow this cache (the handler is a few objects, built in microseconds).
                self._handlers[method] = handler
        return handler

    def cached_methods(self) -> frozenset[str]:
        return frozenset(self._handlers)

    def _handler(self, method: str) -> Any:
        # No request_deserializer/response_serializer: handlers see raw bytes.
        if method in STREAMING_METHODS:
            return grpc.stream_stream_rpc_method_handler(
                lambda requests, ctx: self._serve_stream(method, requests, ctx)
            )
        return grpc.stream_unary_rpc_method_handler(
            lambda requests, ctx: self._serve_unary(method, requests, ctx)
        )

    def _receive(
        self, method: str, requests: Iterator[bytes], context: grpc.ServicerContext
    ) -> bytes:
        """The call's one request message, read in the waiting room."""
        ticket = self.waiting.enter(context)
        request: bytes | None = None
        try:
            request = next(requests)
        except StopIteration:
            pass
        finally:
            # grpc.RpcError from next() (the caller went) propagates: grpc ends the call.
            pushed_out = not self.waiting.leave(ticket)
        if pushed_out:
            # Cancelled under it: whatever arrived meanwhile must not reach the runtime.
            context.abort(
                grpc.StatusCode.CANCELLED,
                f"{method}: no request message while {self.waiting.limit} other calls waited",
            )
        if request is None:
            context.abort(
                grpc.StatusCode.INVALID_ARGUMENT, f"{method} requires exactly one request message"
            )
        assert request is not None  # abort raised otherwise
        return request

    def _serve_unary(
        self, method: str, requests: Iterator[bytes], context: grpc.ServicerContext
    ) -> bytes:
        start = time.perf_counter()
        try:
            request = self._receive(method, requests, context)
            hook = self._hooks.get(method)
            gate = self.placement if hook else self.passthrough
            size = len(request)
            if not self.budget.try_take(size):
                context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED, self.budget.refusal(method, size))
            try:
                if not gate.try_enter():
                    context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED, gate.refusal(method))
                try:
                    response = self._unary(method, request, context, hook)
                finally:
                    gate.leave()
            finally:
                self.budget.give_back(size)
        except BaseException:
            if self._observer is not None:
                self._observer(method, _final_code(context), time.perf_counter() - start)
            raise
        if self._observer is not None:
            self._observer(method, grpc.StatusCode.OK, time.perf_counter() - start)
        return response

    def _serve_stream(
        self, method: str, requests: Iterator[bytes], context: grpc.ServicerContext
    ) -> Iterator[bytes]:
        start = time.perf_counter()
        code = grpc.StatusCode.OK
        try:
            request = self._receive(method, requests, context)
            if not self.streams.try_enter():
                context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED, self.streams.refusal(method))
            try:
                yield from self._stream(method, request, context)
            finally:
                self.streams.leave()
            code = context.code() or grpc.StatusCode.OK
        except GeneratorExit:
            code = grpc.StatusCode.CANCELLED  # the caller went away mid-stream
            raise
        except BaseException:
            code = _final_code(context)
            raise
        finally:
            if self._observer is not None:
                self._observer(method, code, time.perf_counter() - start)

    def _unary(
        self, method: str, request: bytes, context: grpc.ServicerContext, hook: Hook | None
    ) -> bytes:
        metadata = passable(context.invocation_metadata())
        replies: list[Reply] = []

        def forward(body: bytes) -> bytes:
            timeout = remaining(context)
            # A caller that gave up must not have its call done behind its back
            # (kubelet retries a create; the runtime would hold two containers).
            # gRPC may still complete a call whose deadline already passed.
            if timeout is not None and timeout <= 0:
                raise self._gone(method, grpc.StatusCode.DEADLINE_EXCEEDED, "deadline passed")
            if not context.is_active():
                raise self._gone(method, grpc.StatusCode.CANCELLED, "caller cancelled")
            # Once the caller is gone, the runtime call is cancelled too (methods.py).
            cancel_with = None if method in QUICK_METHODS else context.add_callback
            reply = self._backend.unary(
                method, body, timeout=timeout, metadata=metadata, cancel_with=cancel_with
            )
            replies.append(reply)
            return reply.body

        try:
            response = hook(request, forward, context) if hook else forward(request)
        except BackendError as err:
            _abort(context, err)
            raise  # unreachable: abort raises
        except HookAbort as err:
            log.info("%s refused: %s", method, err)
            context.abort(err.code, err.details)
            raise
        if replies:
            last = replies[-1]
            if last.initial_metadata:
                context.send_initial_metadata(last.initial_metadata)
            context.set_trailing_metadata(last.trailing_metadata)
        return response

    def _gone(self, method: str, code: grpc.StatusCode, why: str) -> BackendError:
        return BackendError(
            method,
            self._backend.endpoint_for(method),
            code,
            f"{why} before the call was forwarded to the runtime",
        )

    def _stream(
        self, method: str, request: bytes, context: grpc.ServicerContext
    ) -> Iterator[bytes]:
        call = self._backend.stream(
            method,
            request,
            timeout=remaining(context),
            metadata=passable(context.invocation_metadata()),
        )
        # The caller going away must end the runtime call, or this thread
        # stays blocked on the runtime's stream.
        context.add_callback(call.cancel)
        try:
            first = True
            for message in call:
                if first:
                    first = False
                    initial = passable(call.initial_metadata())
                    if initial:
                        context.send_initial_metadata(initial)
                yield message
        except grpc.RpcError as err:
            _abort(context, self._backend.error(method, err))
        except StreamCancelled:
            # The caller went away or its deadline passed; nobody to tell, but the
            # observer counts the call as the caller saw it end.
            expired = remaining(context) == 0
            context.set_code(
                grpc.StatusCode.DEADLINE_EXCEEDED if expired else grpc.StatusCode.CANCELLED
            )
            return
        finally:
            call.cancel()  # ended early (the caller went): the runtime call too
        context.set_trailing_metadata(passable(call.trailing_metadata()))


class RelayServer:
    """The agent's CRI socket relaying to the runtime.

    `hooks` (full method name -> Hook) is read on every call, so entries may be
    added before `start`. `backend` is shared with hooks for their own calls.
    """

    def __init__(
        self,
        listen_endpoint: str,
        runtime_endpoint: str,
        image_endpoint: str | None = None,
        hooks: Mapping[str, Hook] | None = None,
        socket_group: str = "",
        observer: CallObserver | None = None,
        limits: Limits = DEFAULT_LIMITS,
    ) -> None:
        self.listen = Endpoint.parse(listen_endpoint)
        self.backend = Backend(
            Endpoint.parse(runtime_endpoint),
            Endpoint.parse(image_endpoint) if image_endpoint else None,
        )
        self.hooks: dict[str, Hook] = dict(hooks or {})
        self.limits = limits
        self._socket_group = socket_group
        self._dispatcher = _Dispatcher(self.backend, self.hooks, observer, limits)
        self._executor: ElasticExecutor | None = None
        self._server: Any = None
        self._inode: int | None = None

    @property
    def path(self) -> str:
        return str(self.listen.path)

    def start(self) -> None:
        """Serve; the socket file appears only once the server accepts calls.

        Raises listen.SocketInUseError if a live server owns the path,
        listen.ListenError for other socket problems.
        """
        path = self.listen.path
        temp = listen.prepare(path)
        capacity = self.limits.total + _SLACK
        executor = ElasticExecutor(capacity, name="relay")
        server = grpc.server(
            executor,
            handlers=(self._dispatcher,),
            options=(
                # Replies are the runtime's: never the tighter limit. Requests over
                # kubelet's own limit are refused before they are read.
                ("grpc.max_send_message_length", -1),
                ("grpc.max_receive_message_length", MAX_REQUEST_BYTES),
                ("grpc.max_connection_idle_ms", int(IDLE_CONNECTION_S * 1000)),
            ),
            # Beyond this grpc refuses with RESOURCE_EXHAUSTED itself, so no call ever
            # waits for a thread; the per-kind limits refuse long before.
            maximum_concurrent_rpcs=capacity,
        )
        try:
            bound = server.add_insecure_port(f"unix://{temp.absolute()}")
        except RuntimeError as err:
            listen.discard(temp)
            raise listen.ListenError(f"{temp}: cannot bind: {err}") from err
        if not bound:
            listen.discard(temp)
            raise listen.ListenError(f"{temp}: cannot bind")
        server.start()
        try:
            if self._socket_group:
                # Before the socket appears under its name: never a moment with root's group.
                shutil.chown(temp, group=self._socket_group)
            self._inode = listen.publish(temp, path)
        except OSError as err:
            server.stop(None)
            listen.discard(temp)
            raise listen.ListenError(f"{path}: cannot publish the socket: {err}") from err
        self._server = server
        self._executor = executor
        log.info(
            "relaying %s -> %s (images: %s)",
            self.listen,
            self.backend.runtime_endpoint,
            self.backend.image_endpoint,
        )

    def in_flight(self) -> dict[str, int]:
        """Calls held now, per kind (Limits' names)."""
        d = self._dispatcher
        return {
            "waiting": d.waiting.in_flight,
            "passthrough": d.passthrough.in_flight,
            "placement": d.placement.in_flight,
            "streams": d.streams.in_flight,
        }

    def threads(self) -> int:
        """The relay's worker threads alive now (busy or idle)."""
        return 0 if self._executor is None else self._executor.threads

    def cached_methods(self) -> frozenset[str]:
        """The methods with a cached handler: known CRI methods only, however many
        names callers make up."""
        return self._dispatcher.cached_methods()

    def wait(self, timeout: float | None = None) -> bool:
        """Block until the server stops (or timeout); True if it stopped."""
        return bool(self._server.wait_for_termination(timeout))

    def stop(self, grace: float | None = None) -> None:
        """Stop accepting, let calls in flight finish for `grace` seconds, clean up."""
        if self._server is not None:
            self._server.stop(grace).wait()
            self._server = None
        if self._executor is not None:
            self._executor.shutdown(wait=False)
            self._executor = None
        if self._inode is not None:
            listen.withdraw(self.listen.path, self._inode)
            self._inode = None
        self.backend.close()
