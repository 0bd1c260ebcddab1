"""Decoding what kubelet sends into a request, classifying it, and the policy config."""

from __future__ import annotations

import pytest

from agent.policy.config import ConfigError, PolicyConfig
from agent.policy.errors import InvalidRequest
from agent.policy.request import (
    PREFER_ISOLATED,
    PREFER_SHARED,
    CpuKind,
    Resources,
    classify,
    milli_cpu_limit,
    milli_cpu_request,
)
from agent.workload import QoSClass
from tests.policy.helpers import request
from topology.cpuset import CPUSet

G = QoSClass.GUARANTEED
B = QoSClass.BURSTABLE
BE = QoSClass.BESTEFFORT


@pytest.mark.parametrize(
    ("shares", "milli"),
    # kubelet: shares = milli * 1024 // 1000, at least 2.
    [(2, 0), (0, 0), (102, 100), (512, 500), (1024, 1000), (2048, 2000), (4096, 4000), (256, 250)],
)
def test_milli_cpu_request(shares: int, milli: int) -> None:
    assert milli_cpu_request(Resources(cpu_shares=shares)) == milli


@pytest.mark.parametrize(
    ("quota", "period", "milli"),
    [
        (0, 100_000, 0),
        (-1, 100_000, 0),
        (200_000, 100_000, 2000),
        (50_000, 100_000, 500),
        (25_000, 50_000, 500),
        (100_000, 0, 1000),
    ],
)
def test_milli_cpu_limit(quota: int, period: int, milli: int) -> None:
    assert milli_cpu_limit(Resources(cpu_quota=quota, cpu_period=period)) == milli


@pytest.mark.parametrize(
    ("qos", "milli", "limit", "annotations", "namespace", "kind", "count", "isolated"),
    [
        (G, 2000, None, {}, "default", CpuKind.EXCLUSIVE, 2, False),
        (G, 1000, None, {}, "default", CpuKind.EXCLUSIVE, 1, False),
        (G, 1500, None, {}, "default", CpuKind.SHARED, 0, False),
        (G, 500, None, {}, "default", CpuKind.SHARED, 0, False),
        (B, 2000, 4000, {}, "default", CpuKind.SHARED, 0, False),
        (BE, 0, None, {}, "default", CpuKind.SHARED, 0, False),
        (G, 2000, None, {}, "kube-system", CpuKind.RESERVED, 0, False),
        (
            G,
            2000,
            None,
            {f"{PREFER_SHARED}/container.c": "true"},
            "default",
            CpuKind.SHARED,
            0,
            False,
        ),
        (G, 2000, None, {f"{PREFER_SHARED}/pod": "true"}, "default", CpuKind.SHARED, 0, False),
        # The container's own annotation wins over the pod's.
        (
            G,
            2000,
            None,
            {f"{PREFER_SHARED}/pod": "true", f"{PREFER_SHARED}/container.c": "false"},
            "default",
            CpuKind.EXCLUSIVE,
            2,
            False,
        ),
        # Another container's opt-out does not apply.
        (
            G,
            2000,
            None,
            {f"{PREFER_SHARED}/container.other": "true"},
            "default",
            CpuKind.EXCLUSIVE,
            2,
            False,
        ),
        (
            G,
            3000,
            None,
            {f"{PREFER_ISOLATED}/container.c": "True"},
            "default",
            CpuKind.EXCLUSIVE,
            3,
            True,
        ),
        (G, 3000, None, {f"{PREFER_ISOLATED}/pod": "true"}, "default", CpuKind.EXCLUSIVE, 3, True),
    ],
)
def test_classify(
    qos: QoSClass,
    milli: int,
    limit: int | None,
    annotations: dict[str, str],
    namespace: str,
    kind: CpuKind,
    count: int,
    isolated: bool,
) -> None:
    req = request(
        "k", milli, qos=qos, name="c", limit=limit, annotations=annotations, namespace=namespace
    )
    need = classify(req, PolicyConfig())
    assert (need.kind, need.exclusive_cpus, need.isolated) == (kind, count, isolated)
    if kind is CpuKind.SHARED:
        assert need.milli_cpu == milli


def test_classify_isolated_by_config() -> None:
    need = classify(request("k", 2000), PolicyConfig(isolated_for_exclusive=True))
    assert need.isolated
    asked_not = request("k", 2000, annotations={f"{PREFER_ISOLATED}/pod": "false"})
    assert not classify(asked_not, PolicyConfig(isolated_for_exclusive=True)).isolated


def test_memory_accounted_for_guaranteed_only() -> None:
    assert classify(request("k", 500, memory=1 << 30), PolicyConfig()).memory_bytes == 1 << 30
    burstable = request("k", 500, qos=B, limit=1000, memory=1 << 30)
    assert classify(burstable, PolicyConfig()).memory_bytes == 0


def test_bad_annotation_value_names_the_annotation() -> None:
    req = request("k", 2000, name="c", annotations={f"{PREFER_SHARED}/container.c": "yes"})
    with pytest.raises(InvalidRequest, match=r"prefer-shared-cpus.*container\.c='yes'"):
        classify(req, PolicyConfig())


def test_config_from_mapping() -> None:
    config = PolicyConfig.from_mapping(
        {
            "reserved_cpus": "0,40",
            "reserved_namespaces": ["kube-system", "monitoring"],
            "pin_memory": False,
            "colocate_pods": True,
            "colocate_weight": 3,
        }
    )
    assert config.reserved_cpus == CPUSet.of([0, 40])
    assert config.reserved_namespaces == ("kube-system", "monitoring")
    assert (config.pin_cpus, config.pin_memory, config.colocate_weight) == (True, False, 3)
    assert PolicyConfig.from_mapping({}) == PolicyConfig()


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"reserved_cpu": "0"}, "unknown policy config key.*reserved_cpu"),
        ({"reserved_cpus": "0-x"}, "reserved_cpus: invalid CPU list"),
        ({"reserved_cpus": True}, "reserved_cpus: expected a CPU list"),
        ({"pin_cpus": "yes"}, "pin_cpus: expected true or false, got 'yes'"),
        ({"colocate_weight": "2"}, "colocate_weight: expected an integer"),
        ({"reserved_namespaces": [1]}, "reserved_namespaces: expected a list"),
    ],
)
def test_config_errors(data: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        PolicyConfig.from_mapping(data)
