"""Injected kill points for crash tests: `NUMA_AGENT_CRASH_AT=<name>[@<n>]` makes the
agent SIGKILL itself the n-th time (default: first) it passes the named point.

Read once at import; when unset, `crash_point` is one falsy check.
"""

from __future__ import annotations

import os
import signal
import threading

ENV = "NUMA_AGENT_CRASH_AT"

# The points the agent passes; a name not listed here is refused at start so a
# typo in a test cannot silently test nothing.
POINTS = frozenset(
    {
        "create-after-decision",  # placed, runtime not yet called
        "create-after-runtime",  # the runtime created it, state not yet written
        "create-after-save",  # state written, kubelet not yet answered
        "remove-after-runtime",  # the runtime removed it, state not yet written
        "update-after-runtime",  # an update to another container landed, not yet recorded
    }
)


class CrashPointError(ValueError):
    """NUMA_AGENT_CRASH_AT names no known point."""


def _parse(text: str) -> tuple[str, int]:
    name, _, count = text.partition("@")
    if name not in POINTS:
        raise CrashPointError(f"{ENV}={text!r}: unknown point {name!r} (known: {sorted(POINTS)})")
    try:
        n = int(count) if count else 1
    except ValueError:
        raise CrashPointError(f"{ENV}={text!r}: {count!r} is not a count") from None
    return name, max(n, 1)


_ARMED: tuple[str, int] | None = _parse(os.environ[ENV]) if os.environ.get(ENV) else None
_passes = 0
_lock = threading.Lock()


def crash_point(name: str) -> None:
    """SIGKILL this process if `name` is the armed point (and its count is reached)."""
    if _ARMED is None or _ARMED[0] != name:
        return
    global _passes
    with _lock:
        _passes += 1
        if _passes >= _ARMED[1]:
            os.kill(os.getpid(), signal.SIGKILL)
