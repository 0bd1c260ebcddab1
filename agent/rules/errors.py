"""Errors of the numa-agent.io rule annotations: one class for callers, one inside.

`RuleError` is what callers see: the annotation, the exact path inside its value
(Kubernetes field names, `[i]` for list items, `[key]` for map keys) and the reason.
`PathError` is raised while decoding and compiling, before the annotation is known.
"""

from __future__ import annotations

from agent.affinity.errors import quote

__all__ = ["MAX_REASON", "PathError", "RuleError", "join", "quote"]

# Reasons quote what was written, cut short; YAML's own messages may not be.
MAX_REASON = 1000


class RuleError(ValueError):
    """A rule annotation the agent refuses.

    `path` is empty when the value as a whole is at fault (bad YAML, over a limit,
    not the expected shape); `reason` reads on from the path.
    """

    def __init__(self, annotation: str, path: str, reason: str) -> None:
        self.annotation = annotation
        self.path = _printable(path)
        self.reason = _printable(
            reason if len(reason) <= MAX_REASON else reason[: MAX_REASON - 3] + "..."
        )
        path, reason = self.path, self.reason
        super().__init__(f"{annotation}: {path}: {reason}" if path else f"{annotation}: {reason}")

    def render(self, *, pod: str, container: str) -> str:
        """The message with the container and pod it stops, as the agent refuses it:
        `container 'web' of pod shop/web-0: numa-agent.io/affinity: <path>: <reason>`."""
        return f"container {container!r} of pod {pod}: {self}"

    def copy(self) -> RuleError:
        """A fresh exception to raise: a stored one raised twice piles up tracebacks."""
        return RuleError(self.annotation, self.path, self.reason)

    def __reduce__(self) -> tuple[object, ...]:
        return (RuleError, (self.annotation, self.path, self.reason))


class PathError(Exception):
    """A bad part of an annotation's value, at `path`; RuleError once the caller
    adds the annotation's name."""

    def __init__(self, path: str, reason: str) -> None:
        super().__init__(f"{path}: {reason}" if path else reason)
        self.path = path
        self.reason = reason


def _printable(text: str) -> str:
    """Text that encodes as UTF-8: lone surrogates (from `"\\ud800"` in the
    annotation) escaped, so that logs and gRPC statuses can carry the message."""
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def join(path: str, field: str | int) -> str:
    """`path` extended by a field name or a list index: `a.b`, `a[0]`."""
    if isinstance(field, int):
        return f"{path}[{field}]"
    return f"{path}.{field}" if path else field
