"""Why a container could not be placed: one exception class per failure kind.

The relay maps them once to gRPC codes (ResourceExhausted -> RESOURCE_EXHAUSTED,
InvalidRequest -> INVALID_ARGUMENT); `policy.py` re-exports them.
"""

from __future__ import annotations


class PlacementError(Exception):
    """Base of every placement failure."""


class ResourceExhausted(PlacementError):
    """No pool has the capacity the container needs; the message says what was asked and free."""


class InvalidRequest(PlacementError):
    """The container's request cannot be understood (e.g. a bad opt-out annotation value)."""


class UnknownContainer(PlacementError):
    """An operation named a container key the policy has not placed."""
