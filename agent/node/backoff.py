"""When to try again to adopt a container a relist showed and the agent could not take in.

kubelet relists about once a second. A container that cannot be adopted (its
cpuset overlaps CPUs another holds exclusively, the runtime cannot report its
status) would otherwise cost a runtime call and an error line every second, the
same line each time. Each such container is tried again after FIRST_S, then twice
as long each time, up to CAP_S: 5, 10, 20, 40, 80, 160, 300, 300 ... seconds, one
attempt (and so one log line) per step. A success, or the container leaving the
runtime's listing, forgets it.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass

FIRST_S = 5.0
FACTOR = 2.0
CAP_S = 300.0

Clock = Callable[[], float]


@dataclass(frozen=True, slots=True)
class _Failing:
    delay: float  # the wait its last failure set
    next_try: float


class Backoff:
    """Per key (a container id): whether a try is due now, and for how long a failed
    one puts off the next. Thread-safe; the clock is injected for tests."""

    def __init__(
        self,
        clock: Clock = time.monotonic,
        first_s: float = FIRST_S,
        factor: float = FACTOR,
        cap_s: float = CAP_S,
    ) -> None:
        if first_s <= 0 or factor < 1 or cap_s < first_s:
            raise ValueError(
                f"back-off needs first_s > 0, factor >= 1, cap_s >= first_s; "
                f"got {first_s}, {factor}, {cap_s}"
            )
        self._clock = clock
        self._first_s = first_s
        self._factor = factor
        self._cap_s = cap_s
        self._failing: dict[str, _Failing] = {}
        self._lock = threading.Lock()

    def due(self, key: str) -> bool:
        """True unless `key` failed and its wait has not run out yet."""
        failing = self._failing.get(key)
        return failing is None or self._clock() >= failing.next_try

    def next_delay(self, key: str) -> float:
        """How long a failure of the try now due would put off the next one."""
        failing = self._failing.get(key)
        if failing is None:
            return self._first_s
        return min(failing.delay * self._factor, self._cap_s)

    def failed(self, key: str) -> float:
        """Record a failed try; the seconds until the next one is due."""
        with self._lock:
            delay = self.next_delay(key)
            self._failing[key] = _Failing(delay, self._clock() + delay)
        return delay

    def succeeded(self, key: str) -> None:
        with self._lock:
            self._failing.pop(key, None)

    def keep_only(self, keys: Iterable[str]) -> None:
        """Forget every key not in `keys` (containers a complete listing no longer shows)."""
        live = set(keys)
        with self._lock:
            for key in [k for k in self._failing if k not in live]:
                del self._failing[key]

    def __len__(self) -> int:
        return len(self._failing)
