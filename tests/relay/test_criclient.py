"""kubelet-shaped request builders and endpoint parsing, checked against
kubelet's own arithmetic (pkg/kubelet/cm/helpers_linux.go)."""

from __future__ import annotations

import pytest

from agent.criclient import (
    kubelet_container_config,
    kubelet_pod_config,
    milli_cpu_to_quota,
    milli_cpu_to_shares,
    pod_cgroup_parent,
)
from agent.relay.endpoint import Endpoint, EndpointError
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
    ("text", "path", "target"),
    [
        ("unix:///run/containerd/containerd.sock", "/run/containerd/containerd.sock", None),
        ("/run/containerd/containerd.sock", "/run/containerd/containerd.sock", None),
        (" unix:///a/b.sock ", "/a/b.sock", "unix:///a/b.sock"),
    ],
)
def test_endpoint_spellings(text: str, path: str, target: str | None) -> None:
    ep = Endpoint.parse(text)
    assert str(ep.path) == path
    assert ep.target == (target or f"unix://{path}")


@pytest.mark.parametrize(
    "text", ["tcp://127.0.0.1:1234", "unix://relative.sock", "", "npipe:////./pipe/x"]
)
def test_bad_endpoints_are_refused_by_name(text: str) -> None:
    with pytest.raises(EndpointError) as err:
        Endpoint.parse(text)
    assert repr(text.strip()) in str(err.value) or repr(text) in str(err.value)
