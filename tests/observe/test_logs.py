"""Placement logs: one info line per placement with its fields, the scoring at debug."""

from __future__ import annotations

import json
import logging

import grpc
import pytest

from agent.affinity import ANNOTATION_AFFINITY
from agent.logs import JsonFormatter, TextFormatter
from agent.workload import QoSClass
from devtools.criclient import CRIError
from tests.observe.conftest import LocalNode

AGENT_LOGGER = "agent.node.agent"


def _placed(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name == AGENT_LOGGER and r.msg.startswith("%s %s in")]


def test_placement_logged_at_info_with_fields(
    local_node: LocalNode, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger=AGENT_LOGGER)
    cid = local_node.create("db", "main", 2000, 2000)
    (record,) = _placed(caplog)
    (placement,) = local_node.agent.placements()
    assert record.levelno == logging.INFO
    fields = vars(record)
    assert fields["pod"] == "default/db" and fields["container"] == "main"
    assert fields["container_id"] == cid
    assert fields["pool"] == placement.pool and fields["cpuset"] == placement.cpuset_cpus
    assert fields["exclusive"] is True and isinstance(fields["score"], float)
    # No scoring at info.
    assert not [r for r in caplog.records if r.levelno == logging.DEBUG]

    entry = json.loads(JsonFormatter().format(record))
    assert entry["level"] == "info" and entry["pod"] == "default/db"
    assert entry["cpuset"] == placement.cpuset_cpus and entry["pool"] == placement.pool
    text = TextFormatter().format(record)
    assert f"cpuset={placement.cpuset_cpus}" in text and "container=main" in text


def test_scoring_logged_at_debug(local_node: LocalNode, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger=AGENT_LOGGER)
    cid = local_node.create("web", "app", 500, 0, qos=QoSClass.BURSTABLE)
    debug = [
        r for r in caplog.records if r.levelno == logging.DEBUG and r.msg.startswith("scoring")
    ]
    assert len(debug) == 1
    explanation = local_node.agent.explain(cid)
    assert explanation and explanation in debug[0].getMessage()
    assert json.loads(JsonFormatter().format(debug[0]))["container_id"] == cid


def test_observer_sees_decisions_and_refusals(local_node: LocalNode) -> None:
    local_node.create("db", "main", 2000, 2000)
    assert len(local_node.observer.decisions) == 1 and local_node.observer.decisions[0] >= 0
    with pytest.raises(CRIError) as err:
        local_node.create("huge", "main", 16000, 16000)
    assert err.value.code == grpc.StatusCode.RESOURCE_EXHAUSTED
    bad = {ANNOTATION_AFFINITY: "main:\n- match: {key: name, operator: Sometimes}\n"}
    with pytest.raises(CRIError) as err:
        local_node.create("bad", "main", 500, 0, qos=QoSClass.BURSTABLE, annotations=bad)
    assert err.value.code == grpc.StatusCode.INVALID_ARGUMENT
    # The annotation was refused before any policy call: two decisions, two refusals.
    assert len(local_node.observer.decisions) == 2
    assert local_node.observer.refusals == ["resource_exhausted", "invalid_argument"]
