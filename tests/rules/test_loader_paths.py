"""The annotation loader's two paths (libyaml's events, PyYAML's pure pipeline) give
the same data or the same error for any text, so the fast one changes nothing."""

from __future__ import annotations

import json
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from agent.affinity import loader
from tests.affinity.test_properties import STRUCTURES, YAMLISH


def outcome(text: str, *, pure: bool) -> tuple[str, Any]:
    try:
        if pure:
            return ("data", loader._load_pure(text, loader.MAX_DEPTH))
        return ("data", loader.load(text))
    except loader.LoadError as err:
        return ("error", str(err))


def same(text: str) -> None:
    if len(text.encode("utf-8", "surrogatepass")) > loader.MAX_ANNOTATION_BYTES:
        return  # both refuse by size before reading
    assert outcome(text, pure=False) == outcome(text, pure=True), text


# Pieces on which libyaml and PyYAML are known to differ, or could.
TRICKY = st.lists(
    st.sampled_from(
        [
            *"{}[],:-?#&*!|>'\"%@` \n\\",
            *("a", "b: c", "- x", "  ", "\n  ", "\n- ", "{a:b}", "a:b", "::", "? x", "1"),
            *("true", "~", "---", "...", "!!str", "!!map", "!x", "\\x41", "\\u00e9", "''"),
            *("\r\n", "\r", "\t", "\ufeff", "\x85", "\u2028", "x" * 1100, "0x1F", "1_000"),
            *(".inf", "NaN", "No", "2001-12-14", "<<", "=", "#c", " #", "é"),
        ]
    ),
    max_size=40,
).map("".join)


@settings(max_examples=400, deadline=None)
@given(TRICKY)
def test_tricky_text_reads_alike(text: str) -> None:
    same(text)


@settings(max_examples=200, deadline=None)
@given(YAMLISH)
def test_yamlish_text_reads_alike(text: str) -> None:
    same(text)


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=200))
def test_random_text_reads_alike(text: str) -> None:
    same(text)


@settings(max_examples=200, deadline=None)
@given(STRUCTURES)
def test_dumped_structures_read_alike(data: Any) -> None:
    same(yaml.safe_dump(data))
    same(yaml.safe_dump(data, default_flow_style=True))
    same(yaml.dump(data))  # python tags: the pure path's to refuse
    same(json.dumps(data))  # NaN included: a token YAML reads as a string


@pytest.mark.parametrize(
    "text",
    [
        "a: b\n",
        "!!str 1",
        "a: &x 1\nb: *x\n",
        "|#",
        "{\\?}",
        "!x~!!str",
        "a:\tb",
        "{a: 1,\tb: 2}",
        "x" * 1100 + ": a",
        "[" * 20 + "]" * 20,
        "a: 1\na: 2\n",
        "---\na\n---\nb\n",
    ],
)
def test_known_differences_go_to_the_pure_path(text: str) -> None:
    same(text)


def test_the_fast_path_is_taken_for_plain_text(monkeypatch: pytest.MonkeyPatch) -> None:
    def slow(text: str, max_depth: int) -> loader.Data:
        raise AssertionError("took the pure path")

    assert loader._CParser is not None  # PyYAML's wheels carry libyaml
    monkeypatch.setattr(loader, "_load_pure", slow)
    text = "podAntiAffinity:\n  x: [{key: app, operator: In, values: [db, 'on']}]\n"
    data = loader.load(text)
    assert isinstance(data, dict) and data["podAntiAffinity"] == {
        "x": [{"key": "app", "operator": "In", "values": ["db", "on"]}]
    }
