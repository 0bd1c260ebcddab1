"""Errors of the affinity annotation language: one class per failure kind.

`AnnotationError` is what callers see (it names the annotation, the container, the
rule's position and the field); `ExpressionError` is raised while building one
expression and gets that context added by the parser.
"""

from __future__ import annotations


class ExpressionError(ValueError):
    """An expression (key, operator, values) that cannot mean anything.

    `field` is the expression field at fault ("key", "operator", "values",
    "values[2]"); `reason` reads on from the field's name.
    """

    def __init__(self, field: str, reason: str) -> None:
        super().__init__(f"{field} {reason}")
        self.field = field
        self.reason = reason


class AnnotationError(ValueError):
    """A bad affinity or anti-affinity annotation, or a bad part of one.

    `container` is None when the annotation as a whole is at fault (it then
    concerns every container of the pod); `rule` is the 1-based position in that
    container's list; `field` is a dotted path inside the rule ("match.operator",
    "weight", "scope.values[1]"), or "item <n>" in a list of container names.
    `reason` is the message after the context.
    """

    def __init__(
        self,
        annotation: str,
        reason: str,
        *,
        container: str | None = None,
        rule: int | None = None,
        field: str | None = None,
    ) -> None:
        self.annotation = annotation
        self.container = container
        self.rule = rule
        self.field = field
        self.reason = reason
        where = annotation
        if container is not None:
            where += f": container {quote(container)}"
            if rule is not None:
                where += f", rule {rule}"
        super().__init__(f"{where}: {reason}")

    def __reduce__(self) -> tuple[object, ...]:
        # Keyword-only arguments need help to survive pickling (multiprocessing, logs).
        return (_rebuild, (self.annotation, self.reason, self.container, self.rule, self.field))


def _rebuild(
    annotation: str, reason: str, container: str | None, rule: int | None, field: str | None
) -> AnnotationError:
    return AnnotationError(annotation, reason, container=container, rule=rule, field=field)


def quote(text: str) -> str:
    """Quote user text for a message; long text is cut so a hostile value cannot flood logs."""
    if len(text) > 80:
        text = text[:77] + "..."
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'
