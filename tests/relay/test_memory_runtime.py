"""The in-memory runtime used in-process: lifecycle, filters, the containerd
1.6 merge of UpdateContainerResources, refusals, calls by CRI name."""

from __future__ import annotations

import grpc
import pytest

from agent.kubelet import kubelet_container_config, kubelet_pod_config
from agent.runtime.memory import CallRefused, MemoryRuntime
from agent.workload import QoSClass
from proto import cri_pb2

R = cri_pb2.LinuxContainerResources


def _setup() -> tuple[MemoryRuntime, dict[str, str]]:
    """Two pods; containers a (running, pod1), b (created, pod1), c (exited, pod2)."""
    rt = MemoryRuntime()
    ids: dict[str, str] = {}
    for pod_name, ctrs in (("p1", "ab"), ("p2", "c")):
        pod = kubelet_pod_config(pod_name, "ns", f"uid-{pod_name}", qos=QoSClass.BURSTABLE)
        pod_id = rt.run_pod_sandbox(cri_pb2.RunPodSandboxRequest(config=pod)).pod_sandbox_id
        ids[pod_name] = pod_id
        for name in ctrs:
            cfg = kubelet_container_config(pod, name, 100, 0, 1 << 20)
            req = cri_pb2.CreateContainerRequest(
                pod_sandbox_id=pod_id, config=cfg, sandbox_config=pod
            )
            ids[name] = rt.create_container(req).container_id
    rt.start_container(cri_pb2.StartContainerRequest(container_id=ids["a"]))
    rt.start_container(cri_pb2.StartContainerRequest(container_id=ids["c"]))
    rt.exit_container(ids["c"], exit_code=0)
    return rt, ids


@pytest.mark.parametrize(
    ("make_filter", "expected"),
    [
        (lambda ids: cri_pb2.ContainerFilter(), "abc"),
        (lambda ids: cri_pb2.ContainerFilter(id=ids["b"]), "b"),
        (lambda ids: cri_pb2.ContainerFilter(id=ids["b"][:13]), "b"),  # prefix, like crictl
        (lambda ids: cri_pb2.ContainerFilter(pod_sandbox_id=ids["p1"]), "ab"),
        (
            lambda ids: cri_pb2.ContainerFilter(
                state=cri_pb2.ContainerStateValue(state=cri_pb2.CONTAINER_CREATED)
            ),
            "b",
        ),
        (
            lambda ids: cri_pb2.ContainerFilter(
                state=cri_pb2.ContainerStateValue(state=cri_pb2.CONTAINER_EXITED)
            ),
            "c",
        ),
        (
            lambda ids: cri_pb2.ContainerFilter(
                label_selector={"io.kubernetes.container.name": "a"}
            ),
            "a",
        ),
        (
            lambda ids: cri_pb2.ContainerFilter(
                pod_sandbox_id=ids["p2"], label_selector={"io.kubernetes.pod.name": "p1"}
            ),
            "",
        ),
    ],
)
def test_list_containers_filters(make_filter, expected: str) -> None:  # type: ignore[no-untyped-def]
    rt, ids = _setup()
    resp = rt.list_containers(cri_pb2.ListContainersRequest(filter=make_filter(ids)))
    names = sorted(c.metadata.name for c in resp.containers)
    assert "".join(names) == expected


START = R(cpu_period=100000, cpu_quota=50000, cpu_shares=512, memory_limit_in_bytes=1 << 30)


@pytest.mark.parametrize(
    ("update", "expected"),
    [
        # What containerd 1.6 was seen doing: a cpuset-only update keeps the rest.
        (
            R(cpuset_cpus="2-3", cpuset_mems="0"),
            R(
                cpu_period=100000,
                cpu_quota=50000,
                cpu_shares=512,
                memory_limit_in_bytes=1 << 30,
                cpuset_cpus="2-3",
                cpuset_mems="0",
            ),
        ),
        (
            R(cpu_shares=2048, cpu_quota=200000),
            R(cpu_period=100000, cpu_quota=200000, cpu_shares=2048, memory_limit_in_bytes=1 << 30),
        ),
        (R(), START),
    ],
)
def test_update_container_resources_merges(
    update: cri_pb2.LinuxContainerResources, expected: cri_pb2.LinuxContainerResources
) -> None:
    rt = MemoryRuntime()
    pod = kubelet_pod_config("p", "ns", "u")
    pod_id = rt.run_pod_sandbox(cri_pb2.RunPodSandboxRequest(config=pod)).pod_sandbox_id
    cfg = cri_pb2.ContainerConfig(
        metadata=cri_pb2.ContainerMetadata(name="c"),
        linux=cri_pb2.LinuxContainerConfig(resources=START),
    )
    cid = rt.create_container(
        cri_pb2.CreateContainerRequest(pod_sandbox_id=pod_id, config=cfg)
    ).container_id
    rt.update_container_resources(
        cri_pb2.UpdateContainerResourcesRequest(container_id=cid, linux=update)
    )
    status = rt.container_status(cri_pb2.ContainerStatusRequest(container_id=cid))
    assert status.status.resources.linux == expected


def test_verbose_status_has_the_pid_of_a_running_container() -> None:
    import json

    rt, ids = _setup()
    running = rt.container_status(
        cri_pb2.ContainerStatusRequest(container_id=ids["a"], verbose=True)
    )
    assert json.loads(running.info["info"])["pid"] > 0
    quiet = rt.container_status(cri_pb2.ContainerStatusRequest(container_id=ids["a"]))
    assert dict(quiet.info) == {}


@pytest.mark.parametrize(
    ("call", "code"),
    [
        (
            lambda rt, ids: rt.start_container(
                cri_pb2.StartContainerRequest(container_id=ids["a"])
            ),
            grpc.StatusCode.FAILED_PRECONDITION,  # already running
        ),
        (
            lambda rt, ids: rt.update_container_resources(
                cri_pb2.UpdateContainerResourcesRequest(
                    container_id=ids["c"], linux=R(cpu_shares=2)
                )
            ),
            grpc.StatusCode.FAILED_PRECONDITION,  # exited
        ),
        (
            lambda rt, ids: rt.container_status(
                cri_pb2.ContainerStatusRequest(container_id="nope")
            ),
            grpc.StatusCode.NOT_FOUND,
        ),
        (
            lambda rt, ids: rt.create_container(
                cri_pb2.CreateContainerRequest(pod_sandbox_id="nope")
            ),
            grpc.StatusCode.NOT_FOUND,
        ),
    ],
)
def test_refusals(call, code: grpc.StatusCode) -> None:  # type: ignore[no-untyped-def]
    rt, ids = _setup()
    with pytest.raises(CallRefused) as err:
        call(rt, ids)
    assert err.value.code == code


def test_calls_by_cri_name_reach_the_method_and_unknown_names_are_refused() -> None:
    rt = MemoryRuntime()
    assert rt.call("Version", cri_pb2.VersionRequest()).runtime_api_version == "v1"
    rt.call("PullImage", cri_pb2.PullImageRequest(image=cri_pb2.ImageSpec(image="busybox")))
    assert [i.repo_tags for i in rt.list_images(cri_pb2.ListImagesRequest()).images] == [
        ["busybox"]
    ]
    with pytest.raises(CallRefused) as err:
        rt.call("Attach", cri_pb2.VersionRequest())
    assert (err.value.code, err.value.details) == (
        grpc.StatusCode.UNIMPLEMENTED,
        "Attach is not implemented",
    )


def test_the_product_runtime_has_no_fault_injection() -> None:
    # Failing and holding calls is the tests' FaultyRuntime (devtools.fake_runtime).
    rt = MemoryRuntime()
    for name in ("fail_next", "hold_next", "arrive", "calls", "record"):
        assert not hasattr(rt, name), name


def test_pod_removal_takes_its_containers_and_events_record_it() -> None:
    rt, ids = _setup()
    rt.stop_pod_sandbox(cri_pb2.StopPodSandboxRequest(pod_sandbox_id=ids["p1"]))
    exited = rt.list_containers(
        cri_pb2.ListContainersRequest(
            filter=cri_pb2.ContainerFilter(
                state=cri_pb2.ContainerStateValue(state=cri_pb2.CONTAINER_EXITED)
            )
        )
    )
    assert sorted(c.metadata.name for c in exited.containers) == ["a", "b", "c"]
    rt.remove_pod_sandbox(cri_pb2.RemovePodSandboxRequest(pod_sandbox_id=ids["p1"]))
    left = rt.list_containers(cri_pb2.ListContainersRequest()).containers
    assert [c.metadata.name for c in left] == ["c"]
    deleted = [
        e.container_id
        for e in rt.get_container_events(cri_pb2.GetEventsRequest())
        if e.container_event_type == cri_pb2.CONTAINER_DELETED_EVENT
    ]
    assert sorted(deleted) == sorted([ids["a"], ids["b"]])
