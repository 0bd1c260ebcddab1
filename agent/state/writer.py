"""Saving snapshots of the agent's books in the order they were taken.

A snapshot is taken under the decision lock (so it is consistent) and written
outside it (so a slow disk does not hold decisions); when two callers race, the
older snapshot is never written over the newer one.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

from agent.state.store import StateError, StateStore

log = logging.getLogger(__name__)

Snapshot = tuple[int, dict[str, Any]]


class StateWriter:
    def __init__(self, store: StateStore | None) -> None:
        self.store = store
        self._lock = threading.Lock()
        self._taken = 0  # bumped under the caller's decision lock
        self._written = 0

    def snapshot(self, payload: dict[str, Any]) -> Snapshot:
        """Number a payload; call with the decision lock held."""
        self._taken += 1
        return self._taken, payload

    def write(self, snapshot: Snapshot) -> None:
        """Write it unless a newer one was written already; failures are logged, not raised:
        the runtime already acted, and failing kubelet's call would not undo it."""
        if self.store is None:
            return
        number, payload = snapshot
        with self._lock:
            if number <= self._written:
                return
            try:
                self.store.save(payload)
            except StateError as err:
                log.error("%s; placements continue, a restart will rebuild from the runtime", err)
                return
            self._written = number
