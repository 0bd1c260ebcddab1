"""The machine map as HTML text, over every named machine shape with containers placed
by the real agent: each CPU once with the use the agent's books give it, exclusive
containers labelled on their CPUs, shared ones listed in their pool's box, nothing
loaded from outside, everything escaped. (The same pages in a real browser:
test_browser.py.)"""

from __future__ import annotations

import copy
import re
from collections import Counter
from dataclasses import dataclass, field
from html.parser import HTMLParser
from typing import Any

import pytest

from agent.introspect.cpu_map import MapError, Pool, build_map
from agent.introspect.document import machine_document
from agent.introspect.machine_map import _fit, render_machine_map
from agent.simulate.driver import SimulationResult
from agent.simulate.output import to_html
from tests.observe.mapcases import Expected, cut_matches, expected_cpus, run_shape
from topology.shapes import SHAPES

USE_OF_CLASS = {"x": "exclusive", "s": "shared", "r": "reserved", "i": "isolated", "o": "offline"}


@dataclass
class Page:
    """What the page says, read back with the standard library's HTML parser."""

    cpus: list[tuple[int, str, str | None]] = field(default_factory=list)  # id, use, owner
    labels: list[tuple[str, str, list[str]]] = field(default_factory=list)  # for, title, lines
    chips: list[tuple[str, str, str]] = field(default_factory=list)  # pool, text, title
    tags: Counter[str] = field(default_factory=Counter)
    urls: list[str] = field(default_factory=list)


class _Reader(HTMLParser):
    VOID = {"meta", "link", "img", "br", "hr", "input"}

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.page = Page()
        self.stack: list[tuple[str, dict[str, str]]] = []
        self.text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = {k: v or "" for k, v in attrs}
        self.page.tags[tag] += 1
        self.page.urls.extend(v for k, v in a.items() if k in ("src", "href", "action"))
        if tag not in self.VOID:
            self.stack.append((tag, a))
            self.text = []

    def handle_data(self, data: str) -> None:
        self.text.append(data)
        for _tag, a in self.stack:
            if "data-for" in a:
                a.setdefault("_lines", "")
                if self.stack[-1][1] is not a:
                    a["_lines"] += data + "\n"

    def handle_endtag(self, tag: str) -> None:
        name, a = self.stack.pop()
        assert name == tag, f"</{tag}> closes <{name}>"
        classes = a.get("class", "").split()
        if "cpu" in classes:
            use = next(USE_OF_CLASS[c] for c in classes if c in USE_OF_CLASS)
            self.page.cpus.append((int(a["data-cpu"]), use, a.get("data-c")))
        if "who" in classes:
            lines = a.get("_lines", "").splitlines()
            self.page.labels.append((a["data-for"], a["title"], lines))
        if tag == "li" and "title" in a:
            pool = next(b["data-pool"] for _t, b in reversed(self.stack) if "data-pool" in b)
            self.page.chips.append((pool, "".join(self.text), a["title"]))


def read(html: str) -> Page:
    reader = _Reader()
    reader.feed(html)
    reader.close()
    assert not reader.stack, f"unclosed: {[t for t, _ in reader.stack]}"
    return reader.page


_RESULTS: dict[str, SimulationResult] = {}


def result_for(shape: str) -> SimulationResult:
    if shape not in _RESULTS:
        _RESULTS[shape] = run_shape(shape)
    return _RESULTS[shape]


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_each_cpu_once_with_the_use_the_agent_gives_it(shape: str) -> None:
    result = result_for(shape)
    page = read(to_html(result))
    expected = expected_cpus(result)
    ids = [cpu for cpu, _, _ in page.cpus]
    assert sorted(ids) == sorted(expected), "every CPU, offline ones too, exactly once"
    shown = {cpu: Expected(use, owner) for cpu, use, owner in page.cpus}
    for cpu, want in expected.items():
        owner = want.owner[:12] if want.owner else None
        assert shown[cpu] == Expected(want.use, owner), f"CPU {cpu}"
    assert any(e.use == "exclusive" for e in expected.values())


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_exclusive_containers_are_labelled_shared_ones_listed_in_their_pool(shape: str) -> None:
    result = result_for(shape)
    page = read(to_html(result))
    exclusive = [p for p in result.placements if p.exclusive]
    shared = [p for p in result.placements if not p.exclusive]
    for p in exclusive:
        labels = [lines for cid, _t, lines in page.labels if cid == p.container_id[:12]]
        assert labels, f"{p.pod}/{p.name} has no label"
        for pod_line, name_line in labels:
            assert cut_matches(pod_line, p.pod) and cut_matches(name_line, p.name)
        # One label per run of a core's threads: never more labels than CPUs.
        assert len(labels) <= len(p.cpuset_cpus.split(",")) * 2
    chips = Counter((pool, title.splitlines()[0]) for pool, _text, title in page.chips)
    assert chips == Counter((p.pool, f"{p.namespace}/{p.pod}/{p.name}") for p in shared)
    for _pool, text, title in page.chips:
        assert title.splitlines()[0].endswith(text)  # the chip names its container


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_the_page_is_self_contained(shape: str) -> None:
    html = to_html(result_for(shape))
    page = read(html)
    assert page.tags["script"] == 0 and page.tags["link"] == 0 and page.tags["img"] == 0
    assert page.urls == []
    assert not re.search(r"url\(|@import|https?://", html)
    assert html.startswith("<!DOCTYPE html>") and '<meta charset="utf-8">' in html


def test_hover_details_of_an_exclusive_container() -> None:
    result = result_for("xeon-2s-2numa")
    page = read(to_html(result))
    db = next(p for p in result.placements if p.pod == "db-0")
    title = next(t for cid, t, _ in page.labels if cid == db.container_id[:12])
    assert title.splitlines() == [
        "shop/db-0/postgres",
        f"container {db.container_id[:12]}",
        f"exclusive CPUs {db.cpuset_cpus}, memory nodes {db.cpuset_mems}",
        f"pool {db.pool} · score {db.score:g}",
    ]


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_every_pool_has_one_box_named_as_the_pools_are(shape: str) -> None:
    # The map names the boxes of the document's layout by the parts' naming
    # (agent.policy.parts.part_name): a pool without a box would be listed apart.
    result = result_for(shape)
    doc = machine_document(
        result.machine, result.scenario.config.reserved_cpus, result.placements, result.capacity
    )
    drawn = build_map(doc)
    boxes: list[tuple[str, Pool | None]] = [(drawn.cpus, drawn.machine_pool)]
    for socket in drawn.sockets:
        boxes.append((socket.cpus, socket.pool))
        for die in socket.dies:
            boxes.append((die.cpus, die.pool))
            for node in die.numa_nodes:
                boxes.append((node.cpus, node.pool))
                boxes.extend((group.cpus, group.pool) for group in node.l3_groups)
    for cpus, box in boxes:
        assert box is None or box.cpus == cpus, f"box of CPUs {cpus} lists pool {box.name}"
    named = [box.name for _, box in boxes if box is not None]
    assert sorted(named) == sorted(p["name"] for p in doc["pools"])


def _document() -> dict[str, Any]:
    result = result_for("desktop-1s-4c-ht")
    return machine_document(
        result.machine, result.scenario.config.reserved_cpus, result.placements, result.capacity
    )


HOSTILE = "<script>alert('x')</script>&\"quoted\""


def test_names_are_escaped_everywhere() -> None:
    doc = copy.deepcopy(_document())
    for pool in doc["pools"]:
        for c in pool["containers"]:
            c["pod"] = c["name"] = HOSTILE
            c["namespace"] = "ns" + HOSTILE
    html = render_machine_map(doc, source=HOSTILE, notes=[HOSTILE])
    assert "<script" not in html and "alert('x')" not in html
    page = read(html)
    assert page.tags["script"] == 0
    # The names come back intact as text: escaped, not dropped.
    assert any(lines == [HOSTILE, HOSTILE] for _cid, _t, lines in page.labels)
    assert any(title.startswith(f"ns{HOSTILE}/{HOSTILE}/") for _p, _x, title in page.chips)


def test_a_document_without_the_layout_says_the_agent_is_older() -> None:
    doc = copy.deepcopy(_document())
    del doc["machine"]["layout"]
    with pytest.raises(MapError, match="older than this numa-agent"):
        render_machine_map(doc)


def test_a_malformed_document_is_a_map_error() -> None:
    doc = copy.deepcopy(_document())
    doc["machine"]["reserved_cpus"] = "zero"
    with pytest.raises(MapError, match="reserved_cpus"):
        render_machine_map(doc)
    del doc["pools"]
    with pytest.raises(MapError, match="malformed status document"):
        render_machine_map(doc)


@pytest.mark.parametrize(
    ("text", "chars", "shown"),
    [
        ("db-0", 8, "db-0"),  # fits
        ("checkout-7d9f8b6c4-x2k9q", 8, "checkout-7d9f8b6c4-x2k9q"),  # one CPU: CSS cuts the end
        ("checkout-7d9f8b6c4-x2k9q", 17, "checkout…c4-x2k9q"),  # a core: keep both ends
        ("checkout-7d9f8b6c4-x2k9q", 24, "checkout-7d9f8b6c4-x2k9q"),
    ],
)
def test_labels_are_cut_in_the_middle_when_there_is_room(text: str, chars: int, shown: str) -> None:
    assert _fit(text, chars) == shown


def test_containers_of_a_pool_the_machine_lacks_are_still_listed() -> None:
    doc = copy.deepcopy(_document())
    stray = copy.deepcopy(doc["reserved"]["containers"][0])
    stray.update(pod="stray", name="main", pool="numa9", exclusive=False)
    doc["unknown_pools"] = {"numa9": [stray]}
    page = read(render_machine_map(doc))
    assert [(pool, title.splitlines()[0]) for pool, _t, title in page.chips if pool == "numa9"] == [
        ("numa9", f"{stray['namespace']}/stray/main")
    ]
