"""kubelet's side of the CRI (agent.kubelet): request builders and encodings checked
against kubelet's own arithmetic (pkg/kubelet/cm/helpers_linux.go), and each decoding
the agent relies on checked against its encoding."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agent.kubelet import (
    DEFAULT_CPU_PERIOD,
    MIN_QUOTA_PERIOD,
    MIN_SHARES,
    kubelet_container_config,
    kubelet_container_resources,
    kubelet_pod_config,
    milli_cpu_to_quota,
    milli_cpu_to_shares,
    pod_cgroup_parent,
    qos_from_cgroup_parent,
    quota_to_milli_cpu,
    shares_to_milli_cpu,
)
from agent.workload import QoSClass
from proto import cri_pb2


@pytest.mark.parametrize(
    ("milli", "shares"),
    [(0, 2), (1, 2), (2, 2), (3, 3), (100, 102), (250, 256), (1000, 1024), (1500, 1536)],
)
def test_shares(milli: int, shares: int) -> None:
    assert milli_cpu_to_shares(milli) == shares


@pytest.mark.parametrize(
    ("milli", "quota"), [(0, 0), (5, 1000), (10, 1000), (500, 50000), (2000, 200000)]
)
def test_quota(milli: int, quota: int) -> None:
    assert milli_cpu_to_quota(milli) == quota


@pytest.mark.parametrize(
    ("qos", "driver", "parent"),
    [
        (QoSClass.GUARANTEED, "systemd", "kubepods-podab_cd.slice"),
        (QoSClass.BURSTABLE, "systemd", "kubepods-burstable-podab_cd.slice"),
        (QoSClass.BESTEFFORT, "systemd", "kubepods-besteffort-podab_cd.slice"),
        (QoSClass.GUARANTEED, "cgroupfs", "/kubepods/podab-cd"),
        (QoSClass.BURSTABLE, "cgroupfs", "/kubepods/burstable/podab-cd"),
        (QoSClass.BESTEFFORT, "cgroupfs", "/kubepods/besteffort/podab-cd"),
    ],
)
def test_cgroup_parent(qos: QoSClass, driver: str, parent: str) -> None:
    assert pod_cgroup_parent("ab-cd", qos, driver) == parent
    pod = kubelet_pod_config("web", "ns", "ab-cd", qos=qos, cgroup_driver=driver)
    assert pod.linux.cgroup_parent == parent


def test_unknown_cgroup_driver_is_refused() -> None:
    with pytest.raises(ValueError, match="'cgroupv3'"):
        pod_cgroup_parent("u", QoSClass.GUARANTEED, "cgroupv3")


def test_pod_and_container_configs_carry_kubelet_labels() -> None:
    pod = kubelet_pod_config(
        "web", "shop", "u-1", labels={"app": "web"}, annotations={"numa/affinity": "x"}
    )
    assert dict(pod.labels) == {
        "app": "web",
        "io.kubernetes.pod.name": "web",
        "io.kubernetes.pod.namespace": "shop",
        "io.kubernetes.pod.uid": "u-1",
    }
    assert dict(pod.annotations) == {"numa/affinity": "x"}
    assert pod.linux.security_context.namespace_options.network == cri_pb2.NODE
    assert pod.hostname == ""

    ctr = kubelet_container_config(pod, "app", 1500, 2000, 256 << 20, command=["sleep", "1d"])
    assert dict(ctr.labels) == {
        "io.kubernetes.container.name": "app",
        "io.kubernetes.pod.name": "web",
        "io.kubernetes.pod.namespace": "shop",
        "io.kubernetes.pod.uid": "u-1",
    }
    res = ctr.linux.resources
    assert (res.cpu_shares, res.cpu_quota, res.cpu_period, res.memory_limit_in_bytes) == (
        1536,
        200000,
        100000,
        256 << 20,
    )
    assert list(ctr.command) == ["sleep", "1d"]


def test_no_cpu_limit_sends_no_period_or_quota() -> None:
    pod = kubelet_pod_config("web", "ns", "u")
    res = kubelet_container_config(pod, "app", 100).linux.resources
    assert (res.cpu_shares, res.cpu_quota, res.cpu_period) == (102, 0, 0)


@pytest.mark.parametrize(
    ("parent", "qos"),
    [
        ("kubepods-burstable-pod1b2c_3d.slice", QoSClass.BURSTABLE),
        ("kubepods-besteffort-podabc.slice", QoSClass.BESTEFFORT),
        ("kubepods-podabc.slice", QoSClass.GUARANTEED),
        (
            "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-podx.slice",
            QoSClass.BURSTABLE,
        ),
        ("/kubepods/burstable/pod6b1c-22", QoSClass.BURSTABLE),
        ("/kubepods/besteffort/pod6b1c-22", QoSClass.BESTEFFORT),
        ("/kubepods/pod6b1c-22", QoSClass.GUARANTEED),
        ("/kubepods/pod6b1c-22/", QoSClass.GUARANTEED),
        ("", None),
        ("/system.slice/foo.service", None),
        ("/kubepods/burstable", None),
    ],
)
def test_qos_from_cgroup_parent(parent: str, qos: QoSClass | None) -> None:
    assert qos_from_cgroup_parent(parent) == qos


@pytest.mark.parametrize("driver", ["systemd", "cgroupfs"])
@pytest.mark.parametrize("qos", list(QoSClass))
def test_qos_read_back_from_every_cgroup_parent_kubelet_writes(qos: QoSClass, driver: str) -> None:
    uid = "6b1c0d2e-22aa-4f0e-9c3b-0123456789ab"
    assert qos_from_cgroup_parent(pod_cgroup_parent(uid, qos, driver)) is qos


@given(st.integers(min_value=1, max_value=512))
def test_whole_cpus_survive_shares_exactly(cpus: int) -> None:
    # Exclusive CPUs are decided on this: 1000m must not come back as 999m.
    assert shares_to_milli_cpu(milli_cpu_to_shares(cpus * 1000)) == cpus * 1000


@given(st.integers(min_value=3, max_value=512_000))
def test_any_request_survives_shares_within_one_milli_cpu(milli: int) -> None:
    assert abs(shares_to_milli_cpu(milli_cpu_to_shares(milli)) - milli) <= 1


def test_the_minimum_shares_read_as_no_request() -> None:
    assert milli_cpu_to_shares(0) == MIN_SHARES
    assert shares_to_milli_cpu(MIN_SHARES) == 0
    assert shares_to_milli_cpu(0) == 0


@given(
    st.integers(min_value=10, max_value=512_000),
    st.sampled_from([DEFAULT_CPU_PERIOD, 50_000, 250_000, 1_000_000]),
)
def test_limits_survive_quota_and_period(milli: int, period: int) -> None:
    resources = kubelet_container_resources(milli, milli, cpu_period=period)
    # kubelet never sends a quota under 1ms per period: smaller limits come back as that.
    floor = quota_to_milli_cpu(MIN_QUOTA_PERIOD, period)
    assert quota_to_milli_cpu(resources.cpu_quota, resources.cpu_period) == max(milli, floor)


def test_a_quota_without_period_is_read_against_the_default_period() -> None:
    assert quota_to_milli_cpu(milli_cpu_to_quota(1500), 0) == 1500
    assert quota_to_milli_cpu(0, DEFAULT_CPU_PERIOD) == 0
    assert quota_to_milli_cpu(-1, DEFAULT_CPU_PERIOD) == 0
