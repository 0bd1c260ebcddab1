"""How much memory requests on the CRI socket may hold at once.

gRPC refuses a request over MAX_REQUEST_BYTES before reading it (kubelet sends at
most 16 MiB). Under that, a large request costs several times its size while the
agent handles it (parsed, changed, serialized again, sent on), so large requests
in flight together share a byte budget: one that does not fit is refused at once
with RESOURCE_EXHAUSTED (kubelet retries), which frees its bytes, instead of
growing the agent past its unit's memory limit. Small requests (under
SMALL_REQUEST_BYTES, every ordinary call) never touch the budget.
"""

from __future__ import annotations

import threading

MIB = 1 << 20
# kubelet's own limit on what it sends and receives over CRI.
MAX_REQUEST_BYTES = 16 * MIB
# Request bytes of large requests handled at once. A request costs ~5x its size
# while handled, and every large request arriving meanwhile is held whole until it
# is refused (16 x 15 MiB = 240 MiB): with the agent's own ~60 MiB this keeps it
# well inside the unit's MemoryMax=512M (48 MiB was OOM-killed there under load).
REQUEST_BUDGET_BYTES = 24 * MIB
SMALL_REQUEST_BYTES = 256 << 10


class ByteBudget:
    def __init__(self, budget: int = REQUEST_BUDGET_BYTES) -> None:
        self.budget = budget
        self._used = 0
        self._lock = threading.Lock()

    @property
    def used(self) -> int:
        return self._used

    def try_take(self, size: int) -> bool:
        """Take `size` bytes of the budget (True), or refuse (False). Small ones always fit."""
        if size < SMALL_REQUEST_BYTES:
            return True
        with self._lock:
            if self._used + size > self.budget:
                return False
            self._used += size
            return True

    def give_back(self, size: int) -> None:
        if size < SMALL_REQUEST_BYTES:
            return
        with self._lock:
            self._used -= size

    def refusal(self, method: str, size: int) -> str:
        return (
            f"{method}: a request of {size / MIB:.1f} MiB does not fit: the agent is already "
            f"handling {self._used / MIB:.1f} MiB of large requests (its budget is "
            f"{self.budget / MIB:.0f} MiB); retry later"
        )
