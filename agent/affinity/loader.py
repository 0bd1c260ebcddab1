"""Bounded YAML loading for annotation text: size, nesting, no anchors or aliases.

Produces plain data in which every scalar that is not a YAML string stays marked
(`Scalar`), so the parser can tell `values: [1, yes]` from `values: ["1", "yes"]`
and quote the user's own text back in its message.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, TypeAlias

import yaml
from yaml.composer import Composer
from yaml.constructor import SafeConstructor
from yaml.events import AliasEvent
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode
from yaml.parser import Parser
from yaml.reader import Reader
from yaml.resolver import Resolver
from yaml.scanner import Scanner

MAX_ANNOTATION_BYTES = 64 * 1024
# Deep enough for the language (mapping > list > rule > expression > values >
# scalar is 6) with room to spare; the composer recurses once per level.
MAX_DEPTH = 10

_YAML_TAG = "tag:yaml.org,2002:"
_STR = _YAML_TAG + "str"


class LoadError(ValueError):
    """Annotation text that is not acceptable YAML or breaks a limit; the message
    reads on from the annotation's name."""


@dataclass(frozen=True, slots=True)
class Scalar:
    """A YAML scalar that is not a string: `tag` is "int", "bool", "null", "float",
    "timestamp", ... (or a custom tag as written); `text` is the source text."""

    tag: str
    text: str
    line: int = field(default=0, compare=False)

    def integer(self) -> int | None:
        """The value of an int scalar, None if it is not one or too big to read."""
        if self.tag != "int":
            return None
        try:
            value: int = _CONSTRUCTOR.construct_yaml_int(ScalarNode(_YAML_TAG + "int", self.text))
        except ValueError:  # e.g. more digits than int() will convert
            return None
        return value


Data: TypeAlias = "str | Scalar | list[Data] | dict[str | Scalar, Data] | None"

_CONSTRUCTOR = SafeConstructor()


class _Composer(Reader, Scanner, Parser, Composer, Resolver):
    """PyYAML's pipeline up to the node graph, refusing anchors, aliases and depth."""

    def __init__(self, text: str) -> None:
        Reader.__init__(self, text)
        Scanner.__init__(self)
        Parser.__init__(self)
        Composer.__init__(self)
        Resolver.__init__(self)
        self.depth = 0

    def compose_node(self, parent: Node | None, index: Any) -> Node | None:
        event = self.peek_event()  # type: ignore[no-untyped-call]
        # Aliases are how "billion laughs" documents explode; anchors only serve aliases.
        if isinstance(event, AliasEvent):
            raise LoadError(f"YAML alias *{event.anchor} {_at(event)}: aliases are not allowed")
        anchor = getattr(event, "anchor", None)
        if anchor is not None:
            raise LoadError(f"YAML anchor &{anchor} {_at(event)}: anchors are not allowed")
        self.depth += 1
        if self.depth > MAX_DEPTH:
            raise LoadError(f"nests deeper than {MAX_DEPTH} levels {_at(event)}")
        try:
            return super().compose_node(parent, index)
        finally:
            self.depth -= 1


def load(text: str) -> Data:
    """The single YAML document in `text` as plain data; raises LoadError."""
    size = len(text.encode("utf-8", "surrogatepass"))
    if size > MAX_ANNOTATION_BYTES:
        raise LoadError(f"is {size} bytes long, more than the limit of {MAX_ANNOTATION_BYTES}")
    composer: _Composer | None = None
    try:
        # The reader already checks characters in its constructor, so that is inside too.
        composer = _Composer(text)
        node = composer.get_single_node()
    except yaml.MarkedYAMLError as err:
        raise LoadError(f"is not valid YAML: {_describe(err)}") from err
    except yaml.YAMLError as err:
        raise LoadError(f"is not valid YAML: {' '.join(str(err).split())}") from err
    finally:
        if composer is not None:
            composer.dispose()
    return None if node is None else _convert(node)


def _convert(node: Node) -> Data:
    line = node.start_mark.line + 1
    if isinstance(node, ScalarNode):
        if node.tag == _STR:
            return str(node.value)
        return Scalar(_short(node.tag), str(node.value), line)
    if isinstance(node, SequenceNode) and node.tag == _YAML_TAG + "seq":
        return [_convert(item) for item in node.value]
    if isinstance(node, MappingNode) and node.tag == _YAML_TAG + "map":
        out: dict[str | Scalar, Data] = {}
        lines: dict[str | Scalar, int] = {}
        for key_node, value_node in node.value:
            if not isinstance(key_node, ScalarNode):
                raise LoadError(
                    f"has a list or mapping as a mapping key at line {key_node.start_mark.line + 1}"
                )
            key = _convert(key_node)
            assert isinstance(key, str | Scalar)  # a ScalarNode converts to one of these
            key_line = key_node.start_mark.line + 1
            if key in out:
                shown = key if isinstance(key, str) else key.text
                raise LoadError(
                    f'has the key "{shown}" twice in one mapping '
                    f"(lines {lines[key]} and {key_line})"
                )
            out[key] = _convert(value_node)
            lines[key] = key_line
        return out
    raise LoadError(f"uses YAML tag {node.tag} at line {line}, which is not supported here")


def _short(tag: str) -> str:
    return tag[len(_YAML_TAG) :] if tag.startswith(_YAML_TAG) else tag


def _at(event: Any) -> str:
    mark = event.start_mark
    return f"at line {mark.line + 1}, column {mark.column + 1}"


def _describe(err: yaml.MarkedYAMLError) -> str:
    parts = [err.problem or "malformed"]
    mark = err.problem_mark or err.context_mark
    if mark is not None:
        parts.append(f"at line {mark.line + 1}, column {mark.column + 1}")
    if err.context:
        parts.append(f"({err.context})")
    return " ".join(" ".join(parts).split())
