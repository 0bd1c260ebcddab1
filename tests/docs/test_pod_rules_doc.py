"""docs/pod-rules.md: every annotation example in it parses, and the words the issue
asks for are there."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from agent.rules import ANNOTATION_AFFINITY, ANNOTATION_SPREAD, parse_pod_rules

DOC = Path(__file__).resolve().parents[2] / "docs" / "pod-rules.md"


def yaml_blocks() -> list[str]:
    return re.findall(r"```yaml\n(.*?)```", DOC.read_text(), re.DOTALL)


def annotations(block: str) -> dict[str, str]:
    data = yaml.safe_load(block)
    found: dict[str, str] = {}

    def walk(node: object) -> None:
        if isinstance(node, dict):
            for key, value in node.items():
                if key in (ANNOTATION_AFFINITY, ANNOTATION_SPREAD) and isinstance(value, str):
                    found[key] = value
                walk(value)

    walk(data)
    return found


@pytest.mark.parametrize("block", yaml_blocks())
def test_every_example_parses(block: str) -> None:
    found = annotations(block)
    assert found, "an example block without a numa-agent.io annotation"
    assert not parse_pod_rules(found).is_empty


@pytest.mark.parametrize(
    "words",
    [
        "Levels",
        "Occupancy",
        "Which containers a term matches",
        "First-pod exception",
        "Symmetric",
        "requiredDuringSchedulingRequiredDuringExecution",
        "never evicts",
        "Daemons",
        "Denial-of-service guard",
        "FAILED_PRECONDITION",
        "score(place) =",
        "skew = max over D",
        "minDomains",
        "The pod is the unit of the pod rules",
        "A pod occupies its domains from its first placed container until its\n"
        "  sandbox is stopped",
        "A re-created container gets its place back",
        "A resize never re-checks pod rules",
        "Explanations are bounded and cheap",
        "no tenant can close the node",
        "selfMatch",
    ],
)
def test_the_semantics_are_documented(words: str) -> None:
    assert words in DOC.read_text()
