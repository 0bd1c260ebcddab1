"""How many calls of each kind the relay holds at once, so that no kind can take
the threads another needs.

Every call first waits for its request message in the waiting room, then runs
as one of three kinds, each with its own cap:

- pass-through: unary calls relayed untouched (Version, ExecSync, PullImage, ...);
- placement: unary calls with a hook (CreateContainer, ListContainers, ...);
- stream: server-streaming calls (GetContainerEvents, ...), open for hours.

A kind at its cap refuses the next call of that kind with RESOURCE_EXHAUSTED at
once (kubelet retries), and the others are untouched. The waiting room works the
other way: a caller that sent headers but no request is the one pushed out (its
call cancelled) when the room is full, since a real client sends its request
with its headers and leaves the room within a millisecond.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass

import grpc

log = logging.getLogger(__name__)

WARN_EVERY_S = 10.0  # a flood of refusals logs one line per this many seconds


@dataclass(frozen=True, slots=True)
class Limits:
    """Calls held at once, per kind. The defaults leave kubelet's worst case (about
    one call per pod in flight, 110 pods, with the runtime stuck) far inside each."""

    waiting: int = 64
    passthrough: int = 256
    placement: int = 128
    streams: int = 256

    def __post_init__(self) -> None:
        for kind in ("waiting", "passthrough", "placement", "streams"):
            if getattr(self, kind) < 1:
                raise ValueError(f"relay limit {kind} must be at least 1")

    @property
    def total(self) -> int:
        """Calls (and so threads) at most: each call is in one kind at a time."""
        return self.waiting + self.passthrough + self.placement + self.streams


class _RateLimitedWarning:
    def __init__(self) -> None:
        self._last = 0.0
        self._suppressed = 0

    def warn(self, message: str, *args: object) -> None:
        now = time.monotonic()
        if now - self._last < WARN_EVERY_S:
            self._suppressed += 1
            return
        suppressed, self._suppressed, self._last = self._suppressed, 0, now
        if suppressed:
            message += " (and %d more like it since the last warning)"
            args = (*args, suppressed)
        log.warning(message, *args)


class KindLimit:
    """At most `limit` calls of one kind at once."""

    def __init__(self, kind: str, limit: int) -> None:
        self.kind = kind
        self.limit = limit
        self._count = 0
        self._lock = threading.Lock()
        self._warning = _RateLimitedWarning()

    @property
    def in_flight(self) -> int:
        return self._count

    def try_enter(self) -> bool:
        with self._lock:
            if self._count >= self.limit:
                return False
            self._count += 1
            return True

    def leave(self) -> None:
        with self._lock:
            self._count -= 1

    def refusal(self, method: str) -> str:
        """The RESOURCE_EXHAUSTED details for a call refused at this gate (and a log line)."""
        self._warning.warn(
            "refused %s: %d %s calls already in flight (the limit)", method, self.limit, self.kind
        )
        return (
            f"the agent already has {self.limit} {self.kind} calls in flight (its limit); "
            "retry later"
        )


class WaitingRoom:
    """Calls whose request message has not arrived yet, at most `limit`; when full,
    the call that has waited longest is cancelled to make room."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._waiting: OrderedDict[int, grpc.ServicerContext] = OrderedDict()
        self._next = 0
        self._lock = threading.Lock()
        self._warning = _RateLimitedWarning()

    @property
    def in_flight(self) -> int:
        return len(self._waiting)

    def enter(self, context: grpc.ServicerContext) -> int:
        """Admit a call; returns its ticket for `leave`."""
        evicted: list[grpc.ServicerContext] = []
        with self._lock:
            while len(self._waiting) >= self.limit:
                evicted.append(self._waiting.popitem(last=False)[1])
            ticket = self._next
            self._next += 1
            self._waiting[ticket] = context
        for old in evicted:
            self._warning.warn(
                "cancelled a call that sent no request message while %d others waited",
                self.limit,
            )
            old.cancel()  # its thread, blocked reading the request, wakes up and ends
        return ticket

    def leave(self, ticket: int) -> bool:
        """False if the call was pushed out (cancelled) while it waited."""
        with self._lock:
            return self._waiting.pop(ticket, None) is not None
