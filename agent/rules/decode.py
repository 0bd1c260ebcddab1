"""Annotation text to Kubernetes' shapes: bounded loading, then strict msgspec.

JSON text is read with json.loads (Kubernetes reads JSON as JSON); anything else,
and text that only looks like JSON, with the bounded YAML loader of the affinity
annotations (size, depth, no anchors or aliases). Non-string YAML scalars
(`1`, `yes`, `~`) keep their type, so `values: [1]` is refused as the API server
refuses it. msgspec's errors become PathErrors with our path style and a reason
that quotes what was written.
"""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Iterable
from typing import Any, TypeAlias, get_args, get_origin

import msgspec

from agent.affinity.loader import LoadError, Scalar, load
from agent.rules import kube
from agent.rules.errors import PathError, join, quote
from agent.rules.limits import MAX_ANNOTATION_BYTES, MAX_DEPTH

Segment: TypeAlias = str | int

_MSGSPEC_PATH = re.compile(r"\.([A-Za-z][A-Za-z0-9]*)|\[(\d+)\]|\[\.\.\.\]")
_FIELD_NAME = re.compile(r"[A-Za-z][A-Za-z0-9]*")
_EXPECTED = re.compile(r"Expected `([^`]*)`")
_KINDS = {
    "str": "a string",
    "int": "an integer",
    "object": "a mapping",
    "array": "a list",
    "bool": "a boolean",
}


def decode_affinity(text: str) -> kube.Affinity | None:
    """numa-agent.io/affinity's value; None when it says nothing (empty, null)."""
    decoded: kube.Affinity | None = _decode(text, kube.Affinity)
    return decoded


def decode_spread(text: str) -> kube.SpreadConstraints | None:
    """numa-agent.io/topology-spread-constraints' value; None when it says nothing."""
    decoded: kube.SpreadConstraints | None = _decode(text, kube.SpreadConstraints)
    return decoded


def _decode(text: str, kind: Any) -> Any:
    data = load_text(text)
    if data is None or (isinstance(data, Scalar) and data.tag == "null"):
        return None
    try:
        return msgspec.convert(_plain(data), kind, strict=True)
    except msgspec.ValidationError as err:
        raise _explain(str(err), data, kind) from None
    except UnicodeEncodeError:  # msgspec's strings are UTF-8
        raise PathError(
            "", "has text that is not valid Unicode (a lone surrogate such as \\ud800)"
        ) from None


def load_text(text: str) -> object:
    """The value as plain data (JSON's, or YAML's with its non-string scalars as
    Scalar); PathError with an empty path if it cannot be read or breaks a limit."""
    size = len(text.encode("utf-8", "surrogatepass"))
    if size > MAX_ANNOTATION_BYTES:
        raise PathError("", f"is {size} bytes long, more than the limit of {MAX_ANNOTATION_BYTES}")
    if text.lstrip()[:1] in ("{", "["):
        try:
            data = json.loads(text, object_pairs_hook=_json_object, parse_constant=_json_constant)
        except _DuplicateKey as err:
            raise PathError("", f"has the key {quote(err.key)} twice in one mapping") from None
        except RecursionError:
            raise PathError("", f"nests deeper than {MAX_DEPTH} levels") from None
        except ValueError:
            pass  # not JSON: YAML's flow style, or a mistake YAML's message explains
        else:
            _check_depth(data)
            return data
    try:
        return load(text, max_depth=MAX_DEPTH)
    except LoadError as err:
        raise PathError("", str(err)) from None


class _DuplicateKey(Exception):
    def __init__(self, key: str) -> None:
        super().__init__(key)
        self.key = key


def _json_object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise _DuplicateKey(key)
        out[key] = value
    return out


def _json_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")  # NaN, Infinity: let YAML read them (as strings)


def _check_depth(value: object, depth: int = 1) -> None:
    """The YAML loader's depth rule for JSON: every value is a level."""
    children: Iterable[object]
    if isinstance(value, dict):
        children = value.values()
    elif isinstance(value, list):
        children = value
    else:
        return
    if depth >= MAX_DEPTH and children:
        raise PathError("", f"nests deeper than {MAX_DEPTH} levels")
    for child in children:
        if isinstance(child, dict | list):
            _check_depth(child, depth + 1)


class YamlInt(int):
    """A YAML int as msgspec reads it (an int), keeping its text for messages."""

    text: str


def _yaml_int(value: int, text: str) -> YamlInt:
    number = YamlInt(value)
    number.text = text
    return number


class _BadKey(Exception):
    """A mapping key that is not a string; `segments` grow while unwinding."""

    def __init__(self, key: Scalar) -> None:
        super().__init__(key.text)
        self.key = key
        self.segments: list[Segment] = []


def _plain(data: object) -> object:
    """Data msgspec can convert: YAML ints as ints (YamlInt), nulls as None; other
    non-string scalars (bools, floats, timestamps, custom tags) stay Scalar, which
    no field accepts, so msgspec refuses them and messages quote them."""
    try:
        return _plain_value(data)
    except _BadKey as err:
        where = _format(list(reversed(err.segments)))
        raise PathError(
            where,
            f"has the key {_cut(err.key.text)}, a YAML {err.key.tag}, not a string; "
            f"quote it: {quote(err.key.text)}",
        ) from None


def _plain_value(data: object) -> object:
    if isinstance(data, Scalar):
        if data.tag == "int":
            try:
                number = data.integer()
            except IndexError:  # `!!int` with no digits: Scalar.integer lets this through
                number = None
            return data if number is None else _yaml_int(number, data.text)
        if data.tag == "null":
            return None
        return data
    if isinstance(data, list):
        out_list: list[object] = []
        for index, item in enumerate(data):
            try:
                out_list.append(_plain_value(item))
            except _BadKey as err:
                err.segments.append(index)
                raise
        return out_list
    if isinstance(data, dict):
        out: dict[str, object] = {}
        for key, value in data.items():
            if not isinstance(key, str):
                raise _BadKey(key)
            try:
                out[key] = _plain_value(value)
            except _BadKey as err:
                err.segments.append(key)
                raise
        return out
    return data


def _format(segments: list[Segment]) -> str:
    path = ""
    for segment in segments:
        if isinstance(segment, int) or (len(segment) <= 80 and _FIELD_NAME.fullmatch(segment)):
            path = join(path, segment)
        else:
            path += f"[{_cut(segment)}]"  # a map key, or a name too long to repeat whole
    return path


def _explain(message: str, data: object, root: Any) -> PathError:
    """msgspec's message as our PathError: the path without `$.`, the reason
    naming the field or quoting the value as it was written."""
    head, segments = _split(message)
    value = _data_at(data, segments)
    struct = _type_at(root, segments)
    if head.startswith("Object contains unknown field") and isinstance(value, dict):
        names = _field_names(struct)
        unknown = next((k for k in value if not isinstance(k, str) or k not in names), None)
        if isinstance(unknown, str):
            return PathError(_format([*segments, unknown]), _unknown(unknown, struct, names))
    if head.startswith("Object missing required field") and isinstance(value, dict):
        for info in _fields(struct):
            required = (
                info.default is msgspec.NODEFAULT and info.default_factory is msgspec.NODEFAULT
            )
            if required and info.encode_name not in value:
                return PathError(_format([*segments, info.encode_name]), "is required")
    expected = _EXPECTED.match(head)
    if expected:
        return PathError(_format(segments), _mismatch(expected.group(1), value, struct))
    return PathError(_format(segments), head[:1].lower() + head[1:])


def _split(message: str) -> tuple[str, list[Segment]]:
    head, sep, tail = message.rpartition(" - at `$")
    if not sep or not tail.endswith("`"):
        return message, []
    path = tail[:-1]
    segments: list[Segment] = []
    position = 0
    for match in _MSGSPEC_PATH.finditer(path):
        if match.start() != position:
            return message, []
        position = match.end()
        name, index = match.group(1), match.group(2)
        if name is not None:
            segments.append(name)
        elif index is not None:
            segments.append(int(index))
        else:
            break  # inside a dict's values: the dict itself is what we can name
    else:
        if position != len(path):
            return message, []
    return head, segments


_MISSING = object()


def _data_at(data: object, segments: list[Segment]) -> object:
    for segment in segments:
        in_list = isinstance(segment, int) and isinstance(data, list) and segment < len(data)
        in_dict = isinstance(segment, str) and isinstance(data, dict) and segment in data
        if not (in_list or in_dict):
            return _MISSING
        data = data[segment]  # type: ignore[index]
    return data


def _unwrap(kind: Any) -> Any:
    """The type without its `| None`."""
    args = get_args(kind)
    if args and get_origin(kind) is not tuple and type(None) in args:
        rest = [a for a in args if a is not type(None)]
        return rest[0] if len(rest) == 1 else kind
    return kind


def _type_at(root: Any, segments: list[Segment]) -> Any:
    kind = _unwrap(root)
    for segment in segments:
        if isinstance(segment, int):
            args = get_args(kind)
            if get_origin(kind) is not tuple or not args:
                return None
            kind = _unwrap(args[0])
        else:
            by_name = {f.encode_name: f.type for f in _fields(kind)}
            if segment not in by_name:
                return None
            kind = _unwrap(by_name[segment])
    return kind


def _fields(kind: Any) -> tuple[msgspec.structs.FieldInfo, ...]:
    if isinstance(kind, type) and issubclass(kind, msgspec.Struct):
        return msgspec.structs.fields(kind)
    return ()


def _field_names(kind: Any) -> list[str]:
    return [f.encode_name for f in _fields(kind)]


def _unknown(name: str, struct: Any, names: list[str]) -> str:
    what = getattr(struct, "__name__", "this mapping")
    close = difflib.get_close_matches(name, names, n=1)
    if not close:
        close = [n for n in names if n.lower() == name.lower()]
    hint = f" (did you mean {close[0]}?)" if close else ""
    return f"is not a field of {what}{hint}; its fields are {', '.join(names)}"


def _mismatch(expected: str, value: object, struct: Any) -> str:
    kinds = [k for k in expected.split(" | ") if k != "null"]
    wanted = " or ".join(_KINDS.get(k, k) for k in kinds)
    if kinds == ["object"] and _fields(struct):
        wanted = f"a mapping ({struct.__name__})"
    elif kinds == ["array"] and get_origin(struct) is tuple:
        item = _unwrap(get_args(struct)[0])
        if _fields(item):
            wanted = f"a list of {item.__name__}"
    hint = quote_hint(value) if "str" in kinds else ""
    return f"must be {wanted}, not {describe(value)}{hint}"


def quote_hint(value: object) -> str:
    """`; quote it: "1"` for a scalar that is not a string, else nothing."""
    if isinstance(value, Scalar | YamlInt):
        return (
            ""
            if isinstance(value, Scalar) and value.tag == "null"
            else f"; quote it: {quote(value.text)}"
        )
    if isinstance(value, bool | int | float):
        return f"; quote it: {quote(json.dumps(value))}"
    return ""


def describe(value: object) -> str:
    """What a value is, quoting short text as written: for messages."""
    if value is _MISSING:
        return "what is there"
    if isinstance(value, str):
        return f"the string {quote(value)}"
    if isinstance(value, Scalar):
        if value.tag == "null":
            return "null"
        if not value.text:
            return f"an empty YAML {value.tag}"
        return f"{_cut(value.text)}, a YAML {value.tag}"
    if isinstance(value, YamlInt):
        return f"{_cut(value.text)}, a YAML int"
    if value is None:
        return "null"
    if isinstance(value, bool):
        return f"the boolean {json.dumps(value)}"
    if isinstance(value, int | float):
        return f"the number {_cut(json.dumps(value))}"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "a mapping"
    return type(value).__name__


def _cut(text: str) -> str:
    return text if len(text) <= 40 else text[:37] + "..."
