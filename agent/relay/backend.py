"""The relay's side towards the real runtime: gRPC channels to the runtime and
image endpoints, raw-bytes calls on any method path, and runtime failures as
`BackendError` carrying the status to hand back unchanged."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import grpc

from agent.relay.endpoint import Endpoint, probe
from agent.relay.hooks import Metadata
from agent.relay.methods import IMAGE_SERVICE, KNOWN_METHODS
from agent.relay.streams import PumpedStream, StreamPump

IMAGE_SERVICE_PREFIX = IMAGE_SERVICE

# The relay must not be the tighter limit: kubelet and the runtime set their own.
CHANNEL_OPTIONS = (
    ("grpc.max_receive_message_length", -1),
    ("grpc.max_send_message_length", -1),
)

# Towards the runtime only: gRPC's reconnect backoff grows to 2 minutes, so after a
# long containerd outage the relay would keep failing calls long after it is back.
RUNTIME_CHANNEL_OPTIONS = (
    *CHANNEL_OPTIONS,
    ("grpc.initial_reconnect_backoff_ms", 100),
    ("grpc.min_reconnect_backoff_ms", 100),
    ("grpc.max_reconnect_backoff_ms", 1000),
)

# Registers a function to be called once the relay's caller is gone (or its call
# ends): grpc.ServicerContext.add_callback. False if the caller is already gone.
Canceller = Callable[[Callable[[], None]], bool]

# gRPC reports "no deadline" as a huge time_remaining(); anything beyond this is none.
NO_DEADLINE_S = 1e8

# Transport-level keys gRPC sets itself; passing them on would duplicate them.
_RESERVED_KEYS = frozenset({"user-agent", "content-type", "te", "host"})


def passable(metadata: Iterable[Any] | None) -> Metadata:
    """The metadata entries a proxy may copy from one call to the next."""
    if not metadata:
        return ()
    return tuple(
        (m[0], m[1])
        for m in metadata
        if not m[0].startswith((":", "grpc-")) and m[0] not in _RESERVED_KEYS
    )


def remaining(context: grpc.ServicerContext) -> float | None:
    """The caller's deadline as a timeout for the next hop (None: no deadline)."""
    left: float | None = context.time_remaining()
    if left is None or left > NO_DEADLINE_S:
        return None
    return max(left, 0.0)


class BackendError(Exception):
    """The runtime answered a call with a non-OK status (or could not be reached)."""

    def __init__(
        self,
        method: str,
        endpoint: Endpoint,
        code: grpc.StatusCode,
        details: str,
        trailing_metadata: Metadata = (),
    ) -> None:
        super().__init__(f"{method} at {endpoint}: {code.name}: {details}")
        self.method = method
        self.endpoint = endpoint
        self.code = code
        self.details = details
        self.trailing_metadata = trailing_metadata


@dataclass(frozen=True, slots=True)
class Reply:
    body: bytes
    initial_metadata: Metadata
    trailing_metadata: Metadata


def _identity(data: bytes) -> bytes:
    return data


class _Channel:
    """One endpoint's channel, with unary callables per known method created once."""

    def __init__(self, endpoint: Endpoint) -> None:
        self.endpoint = endpoint
        self.channel = grpc.insecure_channel(endpoint.target, options=RUNTIME_CHANNEL_OPTIONS)
        self._unary: dict[str, Any] = {}
        self._lock = threading.Lock()

    def unary(self, method: str) -> Any:
        fn = self._unary.get(method)
        if fn is None:
            fn = self.channel.unary_unary(
                method, request_serializer=_identity, response_deserializer=_identity
            )
            if method in KNOWN_METHODS:  # unknown names are not kept (methods.py)
                with self._lock:
                    fn = self._unary.setdefault(method, fn)
        return fn

    def cached_methods(self) -> frozenset[str]:
        return frozenset(self._unary)

    def close(self) -> None:
        self.channel.close()


class Backend:
    """Calls on the runtime (and image service) endpoint as raw bytes.

    Public so hooks and the agent's own reconcile calls (UpdateContainerResources,
    ListContainers at start) use the same channels as the pass-through.
    """

    def __init__(self, runtime_endpoint: Endpoint, image_endpoint: Endpoint | None = None) -> None:
        self.runtime_endpoint = runtime_endpoint
        self.image_endpoint = image_endpoint or runtime_endpoint
        self._runtime = _Channel(runtime_endpoint)
        self._image = (
            self._runtime
            if self.image_endpoint == runtime_endpoint
            else _Channel(self.image_endpoint)
        )
        self._pump = StreamPump(RUNTIME_CHANNEL_OPTIONS)

    def _channel(self, method: str) -> _Channel:
        return self._image if method.startswith(IMAGE_SERVICE_PREFIX) else self._runtime

    def endpoint_for(self, method: str) -> Endpoint:
        return self._channel(method).endpoint

    def error(self, method: str, err: grpc.RpcError) -> BackendError:
        """The BackendError for a failed call: the runtime's own status unchanged,
        except that an unreachable runtime is named in the message."""
        chan = self._channel(method)
        code: grpc.StatusCode = err.code()
        details: str = err.details() or ""
        trailing = passable(err.trailing_metadata())
        # UNAVAILABLE is both "could not connect" and a status runtimes send
        # themselves; only the first is reworded, and only after checking.
        if code == grpc.StatusCode.UNAVAILABLE:
            refused = probe(chan.endpoint.path)
            if refused is not None:
                details = (
                    f"container runtime at {chan.endpoint} is unreachable ({refused}): {details}"
                )
        return BackendError(method, chan.endpoint, code, details, trailing)

    def unary(
        self,
        method: str,
        request: bytes,
        *,
        timeout: float | None = None,
        metadata: Metadata = (),
        cancel_with: Canceller | None = None,
    ) -> Reply:
        """One unary call; raises BackendError on any non-OK status.

        `cancel_with` (the relay's caller's `context.add_callback`) ties the call to a
        caller: once the caller is gone (it cancelled, or its deadline passed), the
        runtime call is cancelled and this returns at once with CANCELLED, so the
        thread and its per-kind slot are free again (a long ExecSync held both until
        it ended). Without it the call blocks in grpc's faster path, which cannot be
        cancelled from another thread (the agent's own calls have their timeout).
        """
        fn = self._channel(method).unary(method)
        if cancel_with is not None:
            return self._cancellable(method, fn, request, timeout, metadata, cancel_with)
        try:
            body, call = fn.with_call(
                request, timeout=timeout, metadata=metadata, wait_for_ready=False
            )
        except grpc.RpcError as err:
            raise self.error(method, err) from None
        return Reply(body, passable(call.initial_metadata()), passable(call.trailing_metadata()))

    def _cancellable(
        self,
        method: str,
        fn: Any,
        request: bytes,
        timeout: float | None,
        metadata: Metadata,
        cancel_with: Canceller,
    ) -> Reply:
        call = fn.future(request, timeout=timeout, metadata=metadata, wait_for_ready=False)
        if not cancel_with(call.cancel):
            call.cancel()  # the caller had already gone
        try:
            body = call.result()
        except grpc.FutureCancelledError:
            raise BackendError(
                method,
                self.endpoint_for(method),
                grpc.StatusCode.CANCELLED,
                "the caller went away; the runtime call was cancelled",
            ) from None
        except grpc.RpcError as err:
            raise self.error(method, err) from None
        return Reply(body, passable(call.initial_metadata()), passable(call.trailing_metadata()))

    def stream(
        self,
        method: str,
        request: bytes,
        *,
        timeout: float | None = None,
        metadata: Metadata = (),
    ) -> PumpedStream:
        """A server-streaming call, read by the stream pump (streams.py): iterate it,
        `.cancel()` it; grpc.RpcError while iterating is to be turned into
        BackendError by `error`."""
        target = self._channel(method).endpoint.target
        return self._pump.open(target, method, request, timeout=timeout, metadata=metadata)

    def cached_methods(self) -> frozenset[str]:
        """The methods with cached call objects: known CRI methods only."""
        return self._runtime.cached_methods() | self._image.cached_methods()

    def close(self) -> None:
        self._pump.close()
        self._runtime.close()
        if self._image is not self._runtime:
            self._image.close()
