"""Waiting in tests for something to happen, never for a time to pass.

A test that sleeps and then looks, or asserts a duration or a count of threads at
one instant, passes on an idle machine and fails on a busy one. Here a test names
what it waits for and gets a generous overall limit: a correct program meets the
condition long before it, a broken one fails with the condition named.
"""

from __future__ import annotations

import time
from collections.abc import Callable

# Far beyond what anything in the suite needs on a busy 2-CPU machine; reached only
# when the awaited thing never happens.
LIMIT_S = 30.0
_POLL_S = 0.02


def wait_until(predicate: Callable[[], object], timeout: float = LIMIT_S, what: str = "") -> None:
    """Poll `predicate` until it is true; AssertionError naming `what` after `timeout` s."""
    give_up = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > give_up:
            raise AssertionError(f"timed out after {timeout} s waiting for {what or predicate}")
        time.sleep(_POLL_S)
