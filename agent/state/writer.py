"""The state file and its journal, written in the order snapshots were taken.

A snapshot is taken under the decision lock (so it is consistent) and written
outside it (so a slow disk does not hold decisions); when two callers race, the
older snapshot is never written over the newer one. A write costs what changed:
it appends the changed entries to the journal (journal.py); the full state file is
rewritten only at start and when the journal has grown past the state's size.
"""

from __future__ import annotations

import logging
import threading
import uuid
from typing import Any

from agent.fdreserve import RESERVE, out_of_descriptors
from agent.state.journal import GENERATION_KEY, Journal, JournalError, changes
from agent.state.store import StateError, StateStore

log = logging.getLogger(__name__)

Snapshot = tuple[int, dict[str, Any]]
# The journal is folded into a new full file once it is bigger than the state
# itself, and never before it holds this much (small states would compact often).
MIN_JOURNAL_BYTES = 256 << 10


class StateWriter:
    def __init__(self, store: StateStore | None) -> None:
        self.store = store
        self.journal = None if store is None else Journal(store.state_dir)
        self._lock = threading.Lock()
        self._taken = 0  # bumped under the caller's decision lock
        self._written = 0
        self._last: dict[str, Any] | None = None  # the payload on disk (file + journal)
        self._generation = ""
        self._full_bytes = 0
        self.full_writes = 0  # how many times the whole state was written (tests, metrics)
        # Why the last write failed, "" when it succeeded: while it is set the agent
        # refuses calls that need a new record (node/keeper.py).
        self.failing = ""

    def load(self) -> dict[str, Any] | None:
        """The saved payload: the state file (moved aside if unusable, by the store)
        with its journal replayed; None when there is none."""
        if self.store is None or self.journal is None:
            return None
        loaded = self.store.load()
        if loaded.payload is None:
            return None
        payload = self.journal.replay(loaded.payload)
        payload.pop(GENERATION_KEY, None)
        return payload

    def snapshot(self, payload: dict[str, Any]) -> Snapshot:
        """Number a payload; call with the decision lock held."""
        self._taken += 1
        return self._taken, payload

    def write(self, snapshot: Snapshot, *, full: bool = False) -> bool:
        """Write it unless a newer one was written already; True if the state on disk
        is now at least this one. A failure is logged once (and its end once) and kept
        in `failing`, never raised: the caller decides what to answer. `full` folds
        the journal into a new state file (at a clean stop, or to retry after a failure)."""
        if self.store is None or self.journal is None:
            return True
        number, payload = snapshot
        with self._lock:
            if number <= self._written:
                return True
            if full:
                self._last = None
            try:
                self._write_with_reserve(payload)
            except StateError as err:
                self._last = None  # the next write is a full one
                if not self.failing:
                    log.error(
                        "%s; calls that need a new record are refused until it can be "
                        "written (running containers stay where they are)",
                        err,
                    )
                self.failing = str(err)
                return False
            if self.failing:
                log.warning("the state file can be written again; taking new calls")
                self.failing = ""
            self._written = number
            return True

    def _write_with_reserve(self, payload: dict[str, Any]) -> None:
        """Write; if the process is out of descriptors (a connection flood), once more
        with the descriptors held in reserve for this."""
        try:
            self._write(payload)
        except StateError as err:
            if not out_of_descriptors(err):
                raise
            self._last = None
            with RESERVE.spare(2) as lent:
                if not lent:
                    raise
                self._write(payload)

    def _write(self, payload: dict[str, Any]) -> None:
        assert self.store is not None and self.journal is not None
        if self._last is not None and self.journal.size <= max(MIN_JOURNAL_BYTES, self._full_bytes):
            change = changes(self._last, payload)
            if not change:
                return
            try:
                self.journal.append(self._generation, change)
            except JournalError as err:
                log.warning("%s; writing the whole state instead", err)
            else:
                self._last = payload
                return
        generation = uuid.uuid4().hex
        full = {**payload, GENERATION_KEY: generation}
        # StateError: the old file and journal stay as they were.
        self._full_bytes = self.store.save(full)
        self.journal.reset()
        self._generation = generation
        self._last = payload
        self.full_writes += 1
