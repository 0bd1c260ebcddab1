"""Server-streaming calls to the runtime, all read by one asyncio loop.

grpc's synchronous client parks a thread reading a stream in a wait that wakes
every 100 ms (grpc/_common.py, for signal handling): 200 open GetContainerEvents
streams cost 22% of a CPU with nothing happening, and every other call through
the relay got several times slower. Here one thread runs an event loop that
reads every runtime stream (grpc.aio); the relay's thread serving a stream
blocks on a plain queue, which costs nothing until a message, the end or an
error arrives. Unary calls stay on the synchronous channel: it is the faster
path for them (fewer thread hops).
"""

from __future__ import annotations

import asyncio
import contextlib
import queue
import threading
from collections.abc import Iterator
from typing import Any

import grpc
from grpc import aio

from agent.relay.hooks import Metadata

# Messages read ahead of a slow caller, per stream: bounds the memory a fast runtime
# stream (container stats) can fill while the caller reads slowly.
WINDOW = 64
CLOSE_S = 5.0

_MESSAGE, _END, _ERROR = 0, 1, 2


def _identity(data: bytes) -> bytes:
    return data


class StreamCancelled(Exception):
    """The stream was cancelled from this side (the caller went away)."""


class PumpedStream(Iterator[bytes]):
    """One runtime stream as a blocking iterator of raw messages.

    Iterating raises grpc.RpcError (the runtime's status) or StreamCancelled.
    `initial_metadata` is known once the first message has arrived, and
    `trailing_metadata` once the iterator is exhausted.
    """

    def __init__(self, pump: StreamPump) -> None:
        self._pump = pump
        self._queue: queue.SimpleQueue[tuple[int, Any]] = queue.SimpleQueue()
        self._task: asyncio.Task[None] | None = None
        self._window: asyncio.Semaphore | None = None
        self._cancelled = False
        self._done = False
        self.initial: Metadata = ()
        self.trailing: Metadata = ()

    def __next__(self) -> bytes:
        if self._done:
            raise StopIteration
        kind, value = self._queue.get()
        if kind == _MESSAGE:
            self._pump.call_soon(self._release_one)
            data: bytes = value
            return data
        self._done = True
        if kind == _END:
            raise StopIteration
        raise value

    def initial_metadata(self) -> Metadata:
        return self.initial

    def trailing_metadata(self) -> Metadata:
        return self.trailing

    def cancel(self) -> None:
        """From any thread: end the runtime call; a reader waiting wakes up."""
        if self._cancelled or self._done:
            return
        self._cancelled = True
        self._queue.put((_ERROR, StreamCancelled("stream cancelled by the relay")))
        self._pump.call_soon(self._cancel_task)

    # -- on the loop --------------------------------------------------------------

    def _release_one(self) -> None:
        if self._window is not None:
            self._window.release()

    def _cancel_task(self) -> None:
        if self._task is not None:
            self._task.cancel()

    async def run(
        self,
        channel: aio.Channel,
        method: str,
        request: bytes,
        timeout: float | None,
        metadata: Metadata,
    ) -> None:
        self._window = asyncio.Semaphore(WINDOW)
        call = channel.unary_stream(
            method, request_serializer=_identity, response_deserializer=_identity
        )(request, timeout=timeout, metadata=metadata, wait_for_ready=False)
        try:
            first = True
            while True:
                await self._window.acquire()
                message = await call.read()
                if message is aio.EOF:
                    break
                if first:
                    first = False
                    self.initial = tuple(await call.initial_metadata())
                self._queue.put((_MESSAGE, message))
            self.trailing = tuple(await call.trailing_metadata())
            self._queue.put((_END, None))
        except asyncio.CancelledError:
            call.cancel()
            raise
        except grpc.RpcError as err:
            self._queue.put((_ERROR, err))


class StreamPump:
    """The loop thread (started on first use) and one aio channel per target."""

    def __init__(self, options: tuple[tuple[str, Any], ...] = ()) -> None:
        self._options = options
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._channels: dict[str, aio.Channel] = {}
        self._lock = threading.Lock()
        self._closed = False

    def open(
        self,
        target: str,
        method: str,
        request: bytes,
        *,
        timeout: float | None = None,
        metadata: Metadata = (),
    ) -> PumpedStream:
        if self._closed:
            raise RuntimeError("the relay is stopping; no new runtime streams")
        stream = PumpedStream(self)

        def start() -> None:
            channel = self._channels.get(target)
            if channel is None:
                channel = self._channels[target] = aio.insecure_channel(
                    target, options=self._options
                )
            task = asyncio.get_running_loop().create_task(
                stream.run(channel, method, request, timeout, metadata)
            )
            stream._task = task
            if stream._cancelled:
                task.cancel()

        self.call_soon(start)
        return stream

    def call_soon(self, fn: Any) -> None:
        if self._closed:
            return
        loop = self._loop or self._start()
        with contextlib.suppress(RuntimeError):  # the loop is closing: nothing to do
            loop.call_soon_threadsafe(fn)

    def _start(self) -> asyncio.AbstractEventLoop:
        with self._lock:
            if self._loop is None:
                loop = asyncio.new_event_loop()
                self._thread = threading.Thread(
                    target=loop.run_forever, name="relay-streams", daemon=True
                )
                self._thread.start()
                self._loop = loop
            return self._loop

    def close(self) -> None:
        """Cancel every stream, close the channels, stop the loop thread."""
        with self._lock:
            loop, thread = self._loop, self._thread
            self._loop = self._thread = None
            self._closed = True
        if loop is None or thread is None:
            return

        async def shutdown() -> None:
            tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            for channel in self._channels.values():
                await channel.close()
            self._channels.clear()

        with contextlib.suppress(Exception):  # best effort: the process may be exiting
            asyncio.run_coroutine_threadsafe(shutdown(), loop).result(CLOSE_S)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(CLOSE_S)
        if not thread.is_alive():
            loop.close()
