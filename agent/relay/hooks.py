"""The interception point: what a hook on one CRI method receives and returns.

A hook gets the raw request bytes and a `forward` callable that sends bytes to
the runtime and returns its raw reply; it returns the raw reply for the caller.
Everything without a hook is relayed without being parsed.
"""

from __future__ import annotations

from collections.abc import Callable

import grpc

Metadata = tuple[tuple[str, str | bytes], ...]

# forward(request bytes) -> response bytes; raises BackendError when the runtime fails.
Forward = Callable[[bytes], bytes]
# hook(request bytes, forward, caller's context) -> response bytes.
Hook = Callable[[bytes, Forward, grpc.ServicerContext], bytes]


class HookAbort(Exception):
    """A hook refuses the call: the caller gets `code` and `details`, and the
    runtime is not called (unless the hook already forwarded)."""

    def __init__(self, code: grpc.StatusCode, details: str) -> None:
        super().__init__(f"{code.name}: {details}")
        self.code = code
        self.details = details
