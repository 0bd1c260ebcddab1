"""Bounded YAML loading for annotation text: size, nesting, no anchors or aliases.

Produces plain data in which every scalar that is not a YAML string stays marked
(`Scalar`), so the parser can tell `values: [1, yes]` from `values: ["1", "yes"]`
and quote the user's own text back in its message.

Two paths give the same result: libyaml's event stream (when PyYAML has it) read by
a small composer here, about 30 times faster at 64 KiB than PyYAML's pure-Python
pipeline; and that pipeline, which decides every document the fast path does not
take plainly (any error, anchor, limit, or character on which the two differ), so
error messages stay PyYAML's.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, TypeAlias

import yaml
from yaml.composer import Composer
from yaml.constructor import SafeConstructor
from yaml.events import (
    AliasEvent,
    DocumentEndEvent,
    DocumentStartEvent,
    Event,
    MappingEndEvent,
    MappingStartEvent,
    ScalarEvent,
    SequenceEndEvent,
    SequenceStartEvent,
    StreamEndEvent,
    StreamStartEvent,
)
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode
from yaml.parser import Parser
from yaml.reader import Reader
from yaml.resolver import Resolver
from yaml.scanner import Scanner

try:
    from yaml._yaml import CParser as _CParser
except ImportError:  # PyYAML built without libyaml: the pure-Python path alone
    _CParser = None  # type: ignore[assignment, misc]

MAX_ANNOTATION_BYTES = 64 * 1024
# The one nesting limit of both annotation languages, a scalar counting as a level:
# cri-resource-manager's needs 6 (mapping > list > rule > expression > values >
# scalar), Kubernetes' Affinity 10 (podAffinity > preferred list > term >
# podAffinityTerm > labelSelector > matchExpressions > expression > values > value,
# under the root); the composer recurses once per level.
MAX_DEPTH = 12

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
        except (ValueError, IndexError):  # more digits than int() takes; `!!int ` (empty)
            return None
        return value


Data: TypeAlias = "str | Scalar | list[Data] | dict[str | Scalar, Data] | None"

_CONSTRUCTOR = SafeConstructor()


class _Composer(Reader, Scanner, Parser, Composer, Resolver):
    """PyYAML's pipeline up to the node graph, refusing anchors, aliases and depth."""

    def __init__(self, text: str, max_depth: int = MAX_DEPTH) -> None:
        Reader.__init__(self, text)
        Scanner.__init__(self)
        Parser.__init__(self)
        Composer.__init__(self)
        Resolver.__init__(self)
        self.depth = 0
        self.max_depth = max_depth

    def compose_node(self, parent: Node | None, index: Any) -> Node | None:
        event = self.peek_event()  # type: ignore[no-untyped-call]
        # Aliases are how "billion laughs" documents explode; anchors only serve aliases.
        if isinstance(event, AliasEvent):
            raise LoadError(f"YAML alias *{event.anchor} {_at(event)}: aliases are not allowed")
        anchor = getattr(event, "anchor", None)
        if anchor is not None:
            raise LoadError(f"YAML anchor &{anchor} {_at(event)}: anchors are not allowed")
        self.depth += 1
        if self.depth > self.max_depth:
            raise LoadError(f"nests deeper than {self.max_depth} levels {_at(event)}")
        try:
            return super().compose_node(parent, index)
        finally:
            self.depth -= 1


def load(text: str, *, max_depth: int = MAX_DEPTH) -> Data:
    """The single YAML document in `text` as plain data; raises LoadError.

    `max_depth` bounds nesting (a scalar counts as a level).
    """
    size = len(text.encode("utf-8", "surrogatepass"))
    if size > MAX_ANNOTATION_BYTES:
        raise LoadError(f"is {size} bytes long, more than the limit of {MAX_ANNOTATION_BYTES}")
    if _CParser is not None and not _SLOW_PATH_CHARACTERS.search(text):
        try:
            return _FastComposer(text, max_depth).document()
        except (_NotPlain, yaml.YAMLError, ValueError):
            pass  # an error, a limit or an oddity: the pure path decides, with its message
    return _load_pure(text, max_depth)


def _load_pure(text: str, max_depth: int) -> Data:
    composer: _Composer | None = None
    try:
        # The reader already checks characters in its constructor, so that is inside too.
        composer = _Composer(text, max_depth)
        node = composer.get_single_node()
    except yaml.MarkedYAMLError as err:
        raise LoadError(f"is not valid YAML: {_describe(err)}") from err
    except yaml.YAMLError as err:
        raise LoadError(f"is not valid YAML: {' '.join(str(err).split())}") from err
    finally:
        if composer is not None:
            composer.dispose()
    return None if node is None else _convert(node)


# The fast path takes only text both parsers are known to read alike: none of the
# characters PyYAML's reader refuses, nor those libyaml reads more leniently or
# otherwise (block scalar and tag indicators, anchors and aliases, directives and
# reserved indicators, tabs, a byte order mark inside the text, NEL and the Unicode
# line separators). Annotations rarely have them; text that does takes the pure path.
_SLOW_PATH_CHARACTERS = re.compile(
    Reader.NON_PRINTABLE.pattern + "|[|>!&*%@`?\t\x85\ufeff\u2028\u2029]"
)


class _NotPlain(Exception):
    """The fast path met something it leaves to the pure-Python path."""


class _FastComposer:
    """Plain data straight from libyaml's events, with the pure composer's tag
    resolution. Anything the pure path would refuse (or might read otherwise) is
    _NotPlain, so only documents both read alike are taken here."""

    def __init__(self, text: str, max_depth: int) -> None:
        self.text = text
        self.max_depth = max_depth
        self.resolver = Resolver()

    def document(self) -> Data:
        assert _CParser is not None
        parser = _CParser(self.text)
        try:
            self.parser = parser
            self.expect(StreamStartEvent)
            data: Data = None
            if not isinstance(parser.peek_event(), StreamEndEvent):
                self.expect(DocumentStartEvent)
                data = self.node(1)
                self.expect(DocumentEndEvent)
            self.expect(StreamEndEvent)
            return data
        finally:
            parser.dispose()

    def expect(self, kind: type[Event]) -> Event:
        event = self.parser.get_event()
        if not isinstance(event, kind):
            raise _NotPlain
        return event

    def node(self, depth: int) -> Data:
        event = self.parser.get_event()
        if depth > self.max_depth or getattr(event, "anchor", None) is not None:
            raise _NotPlain
        # libyaml reads some tags PyYAML refuses, and marks "!" implicit otherwise:
        # explicit tags (rare in annotations) are the pure path's.
        if getattr(event, "tag", None) is not None:
            raise _NotPlain
        if isinstance(event, ScalarEvent):
            tag = self.resolver.resolve(ScalarNode, event.value, event.implicit)  # type: ignore[no-untyped-call]
            if tag == _STR:
                return str(event.value)
            line = 0 if event.start_mark is None else event.start_mark.line + 1
            return Scalar(_short(tag), str(event.value), line)
        if isinstance(event, SequenceStartEvent):
            self.check_tag(event, SequenceNode, _YAML_TAG + "seq")
            items: list[Data] = []
            while not isinstance(self.parser.peek_event(), SequenceEndEvent):
                items.append(self.node(depth + 1))
            self.parser.get_event()
            return items
        if isinstance(event, MappingStartEvent):
            self.check_tag(event, MappingNode, _YAML_TAG + "map")
            out: dict[str | Scalar, Data] = {}
            while not isinstance(self.parser.peek_event(), MappingEndEvent):
                if not isinstance(self.parser.peek_event(), ScalarEvent):
                    raise _NotPlain
                key = self.node(depth + 1)
                if not isinstance(key, str | Scalar) or key in out:
                    raise _NotPlain
                out[key] = self.node(depth + 1)
            self.parser.get_event()
            return out
        raise _NotPlain  # an alias, or an event out of place

    def check_tag(self, event: Any, kind: type[Node], expected: str) -> None:
        if self.resolver.resolve(kind, None, event.implicit) != expected:  # type: ignore[no-untyped-call]
            raise _NotPlain


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
