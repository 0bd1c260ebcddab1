"""The relay server: every CRI call on the agent's socket goes to the runtime.

One generic handler serves any `/service/method` path, as raw bytes, so CRI
methods the agent has never heard of still work. A method listed in `hooks`
is handed to its hook, which decides what reaches the runtime.
"""

from __future__ import annotations

import logging
import shutil
import time
from collections.abc import Callable, Iterator, Mapping
from concurrent import futures
from typing import Any

import grpc

from agent.relay import listen
from agent.relay.backend import CHANNEL_OPTIONS, Backend, BackendError, Reply, passable, remaining
from agent.relay.endpoint import Endpoint
from agent.relay.hooks import Hook, HookAbort
from agent.relay.methods import KNOWN_METHODS, STREAMING_METHODS

log = logging.getLogger(__name__)

DEFAULT_MAX_WORKERS = 64

# Told of every call once it ends: (full method name, status code, seconds). Metrics.
CallObserver = Callable[[str, grpc.StatusCode, float], None]


def _abort(context: grpc.ServicerContext, err: BackendError) -> None:
    context.set_trailing_metadata(err.trailing_metadata)
    context.abort(err.code, err.details)


class _Dispatcher(grpc.GenericRpcHandler):  # type: ignore[misc]
    def __init__(
        self, backend: Backend, hooks: Mapping[str, Hook], observer: CallObserver | None = None
    ) -> None:
        self._backend = backend
        self._hooks = hooks
        self._observer = observer
        self._handlers: dict[str, Any] = {}

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
        # The one place calls are observed; without an observer, no wrapper at all.
        if method in STREAMING_METHODS:
            stream = self._stream if self._observer is None else self._observed_stream
            return grpc.unary_stream_rpc_method_handler(lambda req, ctx: stream(method, req, ctx))
        unary = self._unary if self._observer is None else self._observed_unary
        return grpc.unary_unary_rpc_method_handler(lambda req, ctx: unary(method, req, ctx))

    def _observed_unary(self, method: str, request: bytes, context: grpc.ServicerContext) -> bytes:
        assert self._observer is not None
        start = time.perf_counter()
        try:
            response = self._unary(method, request, context)
        except BaseException:
            # context.abort set the code before raising; anything else is UNKNOWN to the caller.
            code = context.code() or grpc.StatusCode.UNKNOWN
            self._observer(method, code, time.perf_counter() - start)
            raise
        self._observer(method, grpc.StatusCode.OK, time.perf_counter() - start)
        return response

    def _observed_stream(
        self, method: str, request: bytes, context: grpc.ServicerContext
    ) -> Iterator[bytes]:
        assert self._observer is not None
        start = time.perf_counter()
        code = grpc.StatusCode.OK
        try:
            yield from self._stream(method, request, context)
        except GeneratorExit:
            code = grpc.StatusCode.CANCELLED  # the caller went away mid-stream
            raise
        except BaseException:
            code = context.code() or grpc.StatusCode.UNKNOWN
            raise
        finally:
            self._observer(method, code, time.perf_counter() - start)

    def _unary(self, method: str, request: bytes, context: grpc.ServicerContext) -> bytes:
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
            reply = self._backend.unary(method, body, timeout=timeout, metadata=metadata)
            replies.append(reply)
            return reply.body

        hook = self._hooks.get(method)
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
        call: Any = self._backend.stream(
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
        max_workers: int = DEFAULT_MAX_WORKERS,
        socket_group: str = "",
        observer: CallObserver | None = None,
    ) -> None:
        self.listen = Endpoint.parse(listen_endpoint)
        self.backend = Backend(
            Endpoint.parse(runtime_endpoint),
            Endpoint.parse(image_endpoint) if image_endpoint else None,
        )
        self.hooks: dict[str, Hook] = dict(hooks or {})
        self._max_workers = max_workers
        self._socket_group = socket_group
        self._dispatcher = _Dispatcher(self.backend, self.hooks, observer)
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
        server = grpc.server(
            futures.ThreadPoolExecutor(max_workers=self._max_workers, thread_name_prefix="relay"),
            handlers=(self._dispatcher,),
            options=CHANNEL_OPTIONS,
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
        log.info(
            "relaying %s -> %s (images: %s)",
            self.listen,
            self.backend.runtime_endpoint,
            self.backend.image_endpoint,
        )

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
        if self._inode is not None:
            listen.withdraw(self.listen.path, self._inode)
            self._inode = None
        self.backend.close()
