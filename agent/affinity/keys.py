"""Expression keys: turning a key such as `pod/labels/app` or `:pod/name:name` into a
function that reads that value from a container, once, when the annotation is parsed.

A value of None means the key does not exist for that container.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Sequence

from agent.affinity.errors import ExpressionError, quote
from agent.workload import ContainerInfo, PodInfo

Accessor = Callable[[ContainerInfo], "str | None"]
PodAccessor = Callable[[PodInfo], "str | None"]

CONTAINER_KEYS = ("name", "namespace", "qosclass", "id", "labels/<label>", "tags/<annotation>")
POD_KEYS = ("name", "namespace", "qosclass", "uid", "id", "labels/<label>")
JOINT_PREFIX = ":"
SIMPLE_SEPARATOR = ":"
# A full-form joint key names its separators right after the ":". As in
# cri-resource-manager, any ASCII character but a letter, a digit, "/" and "." can be
# one ("-", "_", ":" and " " included); those four make up the subkeys themselves.
_NOT_SEPARATORS = frozenset("/.")

_CONTAINER_FIELDS: dict[str, Accessor] = {
    "name": lambda c: c.name,
    "namespace": lambda c: c.pod.namespace,
    "qosclass": lambda c: c.pod.qosclass,
    # An empty id means "not created yet": the key does not exist until it does.
    "id": lambda c: c.id or None,
}
_POD_FIELDS: dict[str, PodAccessor] = {
    "name": lambda p: p.name,
    "namespace": lambda p: p.namespace,
    "qosclass": lambda p: p.qosclass,
    "uid": lambda p: p.uid,
    "id": lambda p: p.id or None,
}


def compile_key(key: str) -> Accessor:
    """The accessor for `key`; raises ExpressionError naming the key if it means nothing."""
    if key.startswith(JOINT_PREFIX):
        return _compile_joint(key)
    return _compile_simple(key, key)


def is_separator(char: str) -> bool:
    """Whether `char` may separate keys or values in a full-form joint key."""
    return len(char) == 1 and char.isascii() and not char.isalnum() and char not in _NOT_SEPARATORS


def is_full_form(key: str) -> bool:
    """Whether joint key `key` is `:<key separator><value separator><subkeys>`.

    Both characters after the ":" must be separators; `:::a:b` is the full form of
    the simple `:a:b`. A simple key's first subkey starts with a letter, so the two
    forms never overlap."""
    body = key[len(JOINT_PREFIX) :]
    return len(body) >= 2 and is_separator(body[0]) and is_separator(body[1])


def split_joint(key: str) -> tuple[tuple[str, ...], str]:
    """The subkeys of joint key `key` and the separator their values are joined with."""
    body = key[len(JOINT_PREFIX) :]
    if is_full_form(key):
        return tuple(body[2:].split(body[0])), body[1]
    return tuple(body.split(SIMPLE_SEPARATOR)), SIMPLE_SEPARATOR


def _compile_joint(key: str) -> Accessor:
    subkeys, value_sep = split_joint(key)
    body = key[len(JOINT_PREFIX) :]
    if not is_full_form(key) and body[:1] not in ("", SIMPLE_SEPARATOR) and is_separator(body[0]):
        # A full-form key missing its value separator (cri-resource-manager would read
        # it as one unknown key that never exists): say so, not "unknown key".
        other = ";" if body[0] != ";" else "|"
        raise ExpressionError(
            "key",
            f"{quote(key)}: a full-form joint key starts with two separators, one for keys "
            f"and one for values, e.g. {quote(JOINT_PREFIX + body[0] + other + body[1:])}",
        )
    getters: list[Accessor] = []
    for sub in subkeys:
        if not sub:
            raise ExpressionError("key", f"{quote(key)} has an empty subkey")
        if sub.startswith(JOINT_PREFIX):
            raise ExpressionError("key", f"{quote(key)}: joint keys cannot nest ({quote(sub)})")
        getters.append(_compile_simple(sub, key))
    return _joined(tuple(getters), value_sep)


def _joined(getters: Sequence[Accessor], value_sep: str) -> Accessor:
    def get(container: ContainerInfo) -> str | None:
        parts = [g(container) for g in getters]
        if all(p is None for p in parts):
            return None
        # A missing subkey contributes "" so the position of the others stays fixed.
        return value_sep.join(p or "" for p in parts)

    return get


def _compile_simple(key: str, whole: str) -> Accessor:
    """`key` is a non-joint key; `whole` is what the user wrote, for messages."""
    field = _CONTAINER_FIELDS.get(key)
    if field is not None:
        return field
    prefix, slash, rest = key.partition("/")
    if slash:
        if prefix == "labels":
            name = _map_key(rest, key, whole)
            return lambda c: c.labels.get(name)
        if prefix == "tags":
            name = _map_key(rest, key, whole)
            return lambda c: c.tags.get(name)
        if prefix == "pod":
            pod_get = _compile_pod(rest, key, whole)
            return lambda c: pod_get(c.pod)
    raise ExpressionError("key", _unknown(key, whole))


def _compile_pod(key: str, full: str, whole: str) -> PodAccessor:
    field = _POD_FIELDS.get(key)
    if field is not None:
        return field
    prefix, slash, rest = key.partition("/")
    if slash and prefix == "labels":
        name = _map_key(rest, full, whole)
        return lambda p: p.labels.get(name)
    raise ExpressionError(
        "key",
        f"{quote(whole)}: {quote(key)} is not a pod key; pod keys are {', '.join(POD_KEYS)}",
    )


def _map_key(name: str, key: str, whole: str) -> str:
    if not name:
        raise ExpressionError("key", f"{_within(key, whole)}{quote(key)} names no label or tag")
    return name


def _within(key: str, whole: str) -> str:
    return "" if key == whole else f"{quote(whole)}: "


def _unknown(key: str, whole: str) -> str:
    if not key:
        return "is empty" if key == whole else f"{quote(whole)} has an empty subkey"
    known = (*_CONTAINER_FIELDS, "labels", "tags", "pod")
    close = difflib.get_close_matches(key.partition("/")[0], known, n=1)
    if close and close[0] in _CONTAINER_FIELDS:
        hint = f' (did you mean "{close[0]}"?)'
    elif close:
        hint = f' (did you mean "{close[0]}/{key.partition("/")[2]}"?)'
    elif "/" not in key:
        # cri-resource-manager's own docs once wrote bare label names as keys.
        hint = f' (did you mean "labels/{key}"?)'
    else:
        hint = ""
    return (
        f"{_within(key, whole)}{quote(key)} is not a container key; keys are "
        f"{', '.join(CONTAINER_KEYS)}, pod/<pod key> or a joint key starting with "
        f'":"{hint}'
    )
