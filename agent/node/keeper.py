"""Changing the node agent's books: under the decision lock, then persisted, then flushed.

Every handler changes the books the same way: take the lock, change, take a
snapshot; release the lock; write the snapshot (a slow disk never holds
decisions); send the cpuset updates now owed. `BookKeeper.change` is that one
path. It also knows whether the state can be written: a call that needs a new
record (a pod, a placement, a resize) is refused with UNAVAILABLE while it cannot
(`must_record`), so kubelet never gets an answer the state file does not hold,
and nothing running moves meanwhile.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import TypeVar

import grpc

from agent.node.books import Books
from agent.node.updates import Updater
from agent.relay.hooks import HookAbort
from agent.state.writer import Snapshot, StateWriter

log = logging.getLogger(__name__)

T = TypeVar("T")


class BookKeeper:
    """The decision lock, the books it guards, and the way changes reach disk and runtime."""

    def __init__(
        self, books: Books, writer: StateWriter, updater: Updater, *, background: bool
    ) -> None:
        self.books = books
        self.writer = writer
        self.updater = updater
        self.lock = threading.Lock()  # the decision lock
        self._background = background

    def read(self, look: Callable[[Books], T]) -> T:
        """`look` at the books under the lock (every read of shared books goes here)."""
        with self.lock:
            return look(self.books)

    def note(self, edit: Callable[[Books], T]) -> T:
        """`edit` books the state file does not hold (unresolved creates, which
        containers ran): under the lock, nothing to write or send."""
        with self.lock:
            return edit(self.books)

    def change(self, edit: Callable[[Books], T], *, flush: bool = True) -> T:
        """Lock, `edit` the books, snapshot; unlock; write; send what is owed.
        An exception from `edit` leaves nothing written. A failed write is logged
        and remembered (see `failing`); the change stands in memory."""
        with self.lock:
            result = edit(self.books)
            snapshot = self.snapshot()
        self.writer.write(snapshot)
        if flush:
            self.flush()
        return result

    def change_recorded(self, edit: Callable[[Books], T], what: str) -> T:
        """`change`, then UNAVAILABLE if the change could not be written: the caller
        must not answer OK for something the state file does not hold."""
        result = self.change(edit)
        self._refuse_if_failing(what)
        return result

    def must_record(self, what: str) -> None:
        """Before a call that needs a new record: UNAVAILABLE unless the state can be
        written. After a failed write, each such call tries a full write again, so
        the agent takes calls again as soon as the disk does."""
        if not self.writer.failing:
            return
        with self.lock:
            snapshot = self.snapshot()
        self.writer.write(snapshot, full=True)
        self._refuse_if_failing(what)

    def _refuse_if_failing(self, what: str) -> None:
        reason = self.writer.failing
        if reason:
            raise HookAbort(
                grpc.StatusCode.UNAVAILABLE,
                f"cannot record {what}: {reason}; numa-agent refuses calls that need a new "
                "record until its state can be written again (running containers stay where "
                "they are)",
            )

    def snapshot(self) -> Snapshot:
        """The state to save (lock held); with no state file it builds nothing."""
        if self.writer.store is None:
            return self.writer.snapshot({})
        return self.writer.snapshot(self.books.payload())

    def flush(self) -> None:
        """Send what is owed now (synchronous mode; the background sender does it itself)."""
        if not self._background:
            self.updater.flush()
