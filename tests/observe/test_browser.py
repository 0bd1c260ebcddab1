"""The machine map in a real headless Chromium (Debian's `chromium`, driven over the
DevTools pipe by benchmarks.chromium): for named machines with containers placed, the
laid-out page shows each CPU once, in the colour of the use the agent's books give it,
each exclusive container's label over its own CPUs, and no box overflowing.

A screenshot per machine stays in the test's temporary directory. Outside CI a host
without Chromium skips these tests with the reason; in CI (env CI set) they fail.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agent.simulate.driver import SimulationResult
from agent.simulate.output import to_html
from benchmarks import chromium
from benchmarks.machine_map_bench import run_big
from tests.observe.mapcases import cut_matches, expected_cpus, run_shape

# A few shapes that differ in what the map must draw, at a desktop width; one at a
# narrow width (boxes must wrap, not overflow); and the large machine.
CASES = [
    ("xeon-2s-2numa", 1400),
    ("epyc-2s-nps4", 1400),  # 8 NUMA nodes, 2 L3 groups each
    ("dies-2-per-socket", 1400),
    ("isolated-offline", 1400),  # isolated and offline CPUs, an isolated CPU held
    ("cxl-memory-only", 1400),  # memory-only nodes beside their sockets
    ("hybrid-desktop", 1400),  # cores of one and of two threads
    ("epyc-2s-nps4", 640),
    ("512-cpus-500-containers", 1600),
]
SLACK = 0.5  # CSS pixels of rounding

# Facts the page gives about itself once laid out; evaluated by the test, the page
# has no script. Rectangles are [left, top, right, bottom].
MEASURE = """(() => {
  const rect = e => { const b = e.getBoundingClientRect();
                      return [b.left, b.top, b.right, b.bottom]; };
  const paint = e => { const s = getComputedStyle(e);
                       return s.backgroundColor + ' ' + s.backgroundImage; };
  const name = e => e.tagName.toLowerCase() + (e.className ? '.' + e.className : '')
                    + (e.dataset.cpu ? '#' + e.dataset.cpu : '');
  const cpus = [...document.querySelectorAll('.cpu')].map(e => ({
    cpu: Number(e.dataset.cpu), owner: e.dataset.c || null, paint: paint(e), rect: rect(e),
    number: e.firstChild.textContent, core: e.parentElement.classList.contains('core')
      ? [...document.querySelectorAll('.core')].indexOf(e.parentElement) : -1}));
  const labels = [...document.querySelectorAll('.who')].map(e => ({
    owner: e.dataset.for, rect: rect(e), title: e.title,
    lines: [...e.children].map(s => s.textContent),
    core: [...document.querySelectorAll('.core')].indexOf(e.parentElement)}));
  const legend = {};
  for (const li of document.querySelectorAll('.legend li[data-use]'))
    legend[li.dataset.use] = paint(li.querySelector('.sw'));
  const outside = [];
  for (const e of document.body.querySelectorAll('*')) {
    const p = e.parentElement, a = rect(e), b = rect(p);
    if (p === document.body) continue;
    if (a[0] < b[0] - SLACK || a[1] < b[1] - SLACK || a[2] > b[2] + SLACK
        || a[3] > b[3] + SLACK)
      outside.push(name(e) + ' outside ' + name(p));
  }
  const spilling = [...document.querySelectorAll('.box, .kids, .cores, .core, .cpu, h2, h3, p')]
    .filter(e => e.scrollWidth > e.clientWidth + 1 || e.scrollHeight > e.clientHeight + 1)
    .map(name);
  const body = rect(document.body);
  const memory = [...document.querySelectorAll('.mem')].map(e => ({
    node: Number(e.id.replace('memnode', '')), rect: rect(e),
    beside: e.parentElement.querySelector('.socket').id,
    socket: rect(e.parentElement.querySelector('.socket'))}));
  return {cpus, labels, legend, outside, spilling, body, memory,
          width: document.documentElement.scrollWidth, viewport: innerWidth};
})()""".replace("SLACK", str(SLACK))


def require_chromium() -> None:
    """Skip (or, in CI, fail) when this host has no Chromium."""
    if chromium.find_chromium() is not None:
        return
    reason = "browser test needs Chromium (Debian: apt-get install chromium)"
    if os.environ.get("CI", "").lower() not in ("", "0", "false"):
        pytest.fail(f"{reason} (CI is set, so this fails instead of skipping)", pytrace=False)
    pytest.skip(reason)


@pytest.fixture(scope="module")
def browser() -> Iterator[chromium.Browser]:
    require_chromium()
    with chromium.launch() as b:
        yield b


_RESULTS: dict[str, SimulationResult] = {}


def placed(machine: str) -> SimulationResult:
    if machine not in _RESULTS:
        _RESULTS[machine] = run_big() if machine.startswith("512-") else run_shape(machine)
    return _RESULTS[machine]


def inside(inner: list[float], outer: list[float]) -> bool:
    return (
        inner[0] >= outer[0] - SLACK
        and inner[1] >= outer[1] - SLACK
        and inner[2] <= outer[2] + SLACK
        and inner[3] <= outer[3] + SLACK
    )


def overlap(a: list[float], b: list[float]) -> float:
    """Area two rectangles share."""
    width = min(a[2], b[2]) - max(a[0], b[0])
    height = min(a[3], b[3]) - max(a[1], b[1])
    return max(width, 0.0) * max(height, 0.0)


@pytest.fixture(scope="module", params=CASES, ids=[f"{m}@{w}" for m, w in CASES])
def laid_out(
    request: pytest.FixtureRequest,
    browser: chromium.Browser,
    tmp_path_factory: pytest.TempPathFactory,
) -> tuple[SimulationResult, dict[str, Any]]:
    """One case laid out once for all the tests below; its page and screenshot are
    kept in a temporary directory of its own (pytest prints where on failure)."""
    machine, width = request.param
    result = placed(machine)
    out = tmp_path_factory.mktemp(f"map-{machine}-{width}")
    page = out / f"{machine}.html"
    page.write_text(to_html(result), encoding="utf-8")
    browser.load(page, width)
    facts: dict[str, Any] = browser.evaluate(MEASURE)
    shot = out / f"{machine}-{width}.png"
    size = browser.screenshot(shot)
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and size[0] == width
    facts["screenshot"] = str(shot)
    return result, facts


def test_each_cpu_appears_once_in_the_colour_of_its_use(
    laid_out: tuple[SimulationResult, dict[str, Any]],
) -> None:
    result, facts = laid_out
    expected = expected_cpus(result)
    cells = facts["cpus"]
    assert sorted(c["cpu"] for c in cells) == sorted(expected)
    legend = facts["legend"]
    assert len(set(legend.values())) == len(legend) == 5, "five uses, five distinct colours"
    for cell in cells:
        want = expected[cell["cpu"]]
        assert cell["paint"] == legend[want.use], (
            f"CPU {cell['cpu']} should look {want.use}; see {facts['screenshot']}"
        )
        assert cell["owner"] == (want.owner[:12] if want.owner else None)
        assert cell["number"] == str(cell["cpu"])
        left, top, right, bottom = cell["rect"]
        assert right - left >= 40 and bottom - top >= 30, f"CPU {cell['cpu']} is too small"
    # Two cells never sit on each other.
    rows: dict[float, list[list[float]]] = {}
    for cell in cells:
        rows.setdefault(round(cell["rect"][1]), []).append(cell["rect"])
    for rects in rows.values():
        rects.sort()
        assert all(a[2] <= b[0] + SLACK for a, b in itertools.pairwise(rects))


def test_each_exclusive_container_is_labelled_on_its_own_cpus(
    laid_out: tuple[SimulationResult, dict[str, Any]],
) -> None:
    result, facts = laid_out
    owners = {p.container_id[:12]: p for p in result.placements if p.exclusive}
    assert owners, "the case places exclusive containers"
    covered: dict[int, str] = {}
    for label in facts["labels"]:
        p = owners[label["owner"]]
        assert label["title"].startswith(f"{p.namespace}/{p.pod}/{p.name}\n")
        assert cut_matches(label["lines"][0], p.pod) and cut_matches(label["lines"][1], p.name)
        under = [
            c
            for c in facts["cpus"]
            if c["core"] == label["core"] and overlap(c["rect"], label["rect"]) > 1
        ]
        assert under, f"label of {p.name} lies on no CPU"
        assert all(c["owner"] == label["owner"] for c in under), "a label on another's CPU"
        hull = [
            min(c["rect"][0] for c in under),
            min(c["rect"][1] for c in under),
            max(c["rect"][2] for c in under),
            max(c["rect"][3] for c in under),
        ]
        assert inside(label["rect"], hull)
        for c in under:
            assert c["cpu"] not in covered, f"CPU {c['cpu']} has two labels"
            covered[c["cpu"]] = label["owner"]
    exclusive_cells = {c["cpu"]: c["owner"] for c in facts["cpus"] if c["owner"]}
    assert covered == exclusive_cells, "every exclusive CPU carries its container's label"


def test_nothing_overflows_its_box(laid_out: tuple[SimulationResult, dict[str, Any]]) -> None:
    _result, facts = laid_out
    assert facts["outside"] == [], facts["screenshot"]
    assert facts["spilling"] == [], facts["screenshot"]
    assert facts["width"] <= facts["viewport"], "the page scrolls sideways"
    assert facts["body"][2] <= facts["viewport"]


def test_memory_only_nodes_stand_beside_their_socket(
    laid_out: tuple[SimulationResult, dict[str, Any]],
) -> None:
    result, facts = laid_out
    machine = result.machine
    socket_of = {n.id: s.id for s in machine.sockets for n in s.numa_nodes}
    want = {m.id: f"socket{socket_of[m.closest_cpu_node]}" for m in machine.memory_only_nodes}
    assert {m["node"]: m["beside"] for m in facts["memory"]} == want
    for m in facts["memory"]:
        node, socket = m["rect"], m["socket"]
        assert node[0] >= socket[2], "to the right of its socket"
        assert node[1] < socket[3] and node[3] > socket[1], "level with its socket"


PRINTED = """(() => {
  const paint = e => { const s = getComputedStyle(e);
                       return s.backgroundColor + ' ' + s.backgroundImage; };
  const legend = {};
  for (const li of document.querySelectorAll('.legend li[data-use]'))
    legend[li.dataset.use] = paint(li.querySelector('.sw'));
  return {legend, print: matchMedia('print').matches,
          cells: [...document.querySelectorAll('.cpu')].map(e => [Number(e.dataset.cpu),
            paint(e), getComputedStyle(e).printColorAdjust])};
})()"""


def test_prints_in_colour(browser: chromium.Browser, tmp_path: Path) -> None:
    """Printed, the CPUs keep their colours (browsers drop backgrounds unless told)."""
    result = placed("isolated-offline")
    page = tmp_path / "isolated-offline.html"
    page.write_text(to_html(result), encoding="utf-8")
    browser.load(page, 1400)
    browser.emulate_media("print")
    try:
        facts = browser.evaluate(PRINTED)
        pdf = tmp_path / "isolated-offline.pdf"
        browser.print_pdf(pdf)
    finally:
        browser.emulate_media("")
    assert facts["print"]
    legend = facts["legend"]
    assert len(set(legend.values())) == 5
    expected = expected_cpus(result)
    assert sorted(cpu for cpu, _, _ in facts["cells"]) == sorted(expected)
    for cpu, paint, adjust in facts["cells"]:
        assert paint == legend[expected[cpu].use] and adjust == "exact", f"CPU {cpu}"
    assert pdf.read_bytes().startswith(b"%PDF-")
