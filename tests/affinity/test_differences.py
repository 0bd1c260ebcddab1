"""docs/affinity.md says what numa-agent does where cri-resource-manager differs, and
how the symmetric shorthand adds up with `symmetric_affinity`; these tests read the
two tables from the document and hold every numa-agent claim to the code.

Every inline code span of a numa-agent cell must be a checkable fact, so the
table cannot say something these tests do not check.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from agent.affinity import (
    ANNOTATION_AFFINITY,
    ANNOTATION_ANTI_AFFINITY,
    AnnotationError,
    PodAffinities,
    effective_affinity,
    parse_pod_affinities,
)
from tests.affinity.workloads import container, pod

DOC = Path(__file__).resolve().parents[2] / "docs" / "affinity.md"
ANNOTATIONS = {"affinity": ANNOTATION_AFFINITY, "anti-affinity": ANNOTATION_ANTI_AFFINITY}

# The pods the Differences table's inputs belong to (described above the table).
SHOP = pod("web-0", namespace="shop", uid="uid-shop-web-0")
TEST = pod("web-0", namespace="test", uid="uid-test-web-0")
WORLD = {
    "web": container("web", SHOP),
    "db": container("db", SHOP, labels={"app.kubernetes.io/name": "db"}),
    "cache": container("cache", SHOP),
    "test/db": container("db", TEST, labels={"app.kubernetes.io/name": "db"}),
}


def section(title: str) -> str:
    text = DOC.read_text()
    start = text.index(f"\n{title}\n")
    end = text.find("\n## ", start + 1)
    return text[start : end if end >= 0 else len(text)]


def table_rows(text: str) -> list[list[str]]:
    """The cells of the first Markdown table in `text`, without header and rule."""
    lines = [line for line in text.splitlines() if line.startswith("|")]
    first = text.splitlines().index(lines[0])
    rows = []
    for line in text.splitlines()[first:]:
        if not line.startswith("|"):
            break
        rows.append([cell.strip() for cell in line.strip().strip("|").split(" | ")])
    return rows[2:]


DIFFERENCES = table_rows(section("## Differences from cri-resource-manager"))
INPUT = re.compile(r"^(affinity|anti-affinity) `([^`]+)`$")
FACT_AFFINITY = re.compile(r"^A\(([\w/]+), ([\w/]+)\) = (-?\d+)$")
FACT_REFUSED = re.compile(r"^(\w+) refused: (.+)$")
FACT_ACCEPTED = re.compile(r"^(\w+) accepted$")


def parse_input(cell: str) -> PodAffinities:
    found = INPUT.match(cell)
    assert found, f"input cell must be an annotation name and one code span: {cell!r}"
    annotation, code = found.groups()
    return parse_pod_affinities({ANNOTATIONS[annotation]: code})  # flow YAML, as written


def affinity(parsed: PodAffinities, me: str, other: str) -> int:
    subject = WORLD[me]
    return effective_affinity(subject, parsed.rules_for(subject.name), WORLD[other])


def check_fact(parsed: PodAffinities, fact: str) -> None:
    if found := FACT_AFFINITY.match(fact):
        me, other, value = found.groups()
        assert affinity(parsed, me, other) == int(value), fact
    elif found := FACT_REFUSED.match(fact):
        who, text = found.groups()
        names = list(WORLD) if who == "all" else [who]
        for name in names:
            with pytest.raises(AnnotationError) as caught:
                parsed.rules_for(WORLD[name].name)
            assert text in str(caught.value), (fact, str(caught.value))
            assert caught.value.container == (None if who == "all" else who)
    elif found := FACT_ACCEPTED.match(fact):
        parsed.rules_for(WORLD[found.group(1)].name)
    else:
        pytest.fail(f"not a checkable fact: {fact!r}")


def test_the_differences_table_is_there() -> None:
    assert len(DIFFERENCES) >= 15
    assert all(len(row) == 4 for row in DIFFERENCES), [r for r in DIFFERENCES if len(r) != 4]
    # The deliberate differences the project keeps are all in it.
    inputs = " ".join(row[0] for row in DIFFERENCES)
    for needle in ("weight: 5000", "weight: -5", "weight: 2.0", "[on, 1]", "nmae", "NotExists"):
        assert needle in inputs, needle


@pytest.mark.parametrize(
    ("cell_input", "outcome"),
    [(row[0], row[2]) for row in DIFFERENCES],
    ids=[f"row{i + 1}" for i in range(len(DIFFERENCES))],
)
def test_numa_agent_does_what_the_differences_table_says(cell_input: str, outcome: str) -> None:
    parsed = parse_input(cell_input)
    facts = re.findall(r"`([^`]+)`", outcome)
    assert facts, f"the numa-agent cell states nothing checkable: {outcome!r}"
    for fact in facts:
        check_fact(parsed, fact)


SYMMETRY = table_rows(section("### Symmetry, and `symmetric_affinity`"))
PAIR = pod("pair-0")
A, B = container("a", PAIR), container("b", PAIR)


@pytest.mark.parametrize("row", SYMMETRY, ids=[f"row{i + 1}" for i in range(len(SYMMETRY))])
def test_the_symmetry_table(row: list[str]) -> None:
    code, a_to_b, b_to_a, symmetric = row
    assert code.startswith("`") and code.endswith("`")
    parsed = parse_pod_affinities({ANNOTATION_AFFINITY: code.strip("`")})
    assert parsed.errors == ()
    forward = effective_affinity(A, parsed.rules_for("a"), B)
    backward = effective_affinity(B, parsed.rules_for("b"), A)
    # symmetric_affinity scores the later container by A(later, earlier) + A(earlier, later).
    assert (forward, backward, forward + backward) == (int(a_to_b), int(b_to_a), int(symmetric))


def test_the_symmetry_table_covers_both_forms() -> None:
    assert len(SYMMETRY) >= 4
    codes = [row[0] for row in SYMMETRY]
    assert "`a: [b]`" in codes and any("match" in c for c in codes)
