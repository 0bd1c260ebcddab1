"""The committed generated code matches proto/cri.proto, and the subset keeps
every field it does not declare (the relay's byte-for-byte promise)."""

from __future__ import annotations

from pathlib import Path

import pytest
from google.protobuf import descriptor_pb2
from google.protobuf.internal import encoder

from proto import cri_pb2
from proto.generate import GENERATED, REPO_ROOT, generate


def test_committed_code_is_fresh(tmp_path: Path) -> None:
    generate(tmp_path)
    for name in GENERATED:
        fresh = (tmp_path / "proto" / name).read_bytes()
        committed = (REPO_ROOT / "proto" / name).read_bytes()
        assert fresh == committed, f"proto/{name} is stale: run `python -m proto.generate`"


def _field(number: int, wire_type: int, payload: bytes) -> bytes:
    """One encoded field: tag varint then payload (already length-prefixed if needed)."""
    return encoder._VarintBytes((number << 3) | wire_type) + payload


def _len_field(number: int, data: bytes) -> bytes:
    return _field(number, 2, encoder._VarintBytes(len(data)) + data)


# Fields upstream has and our subset lacks, encoded by hand so the test does
# not depend on the subset to build them.
CDI_DEVICE = _len_field(17, _len_field(1, b"vendor.com/gpu=0"))  # ContainerConfig.CDI_devices
STOP_SIGNAL = _field(18, 0, encoder._VarintBytes(15))  # ContainerConfig.stop_signal (enum)
MADE_UP = _len_field(99, b"from the future")
HUGEPAGES = _len_field(8, _len_field(1, b"2MB") + _field(2, 0, encoder._VarintBytes(1 << 21)))


@pytest.mark.parametrize(
    ("message_type", "known", "unknown"),
    [
        (
            cri_pb2.ContainerConfig,
            cri_pb2.ContainerConfig(metadata=cri_pb2.ContainerMetadata(name="app")),
            CDI_DEVICE + STOP_SIGNAL,
        ),
        (cri_pb2.ContainerConfig, cri_pb2.ContainerConfig(log_path="x.log"), MADE_UP),
        (
            cri_pb2.LinuxContainerResources,
            cri_pb2.LinuxContainerResources(cpu_shares=1024, cpuset_cpus="0-3"),
            HUGEPAGES,
        ),
        (cri_pb2.PodSandboxConfig, cri_pb2.PodSandboxConfig(hostname="h"), MADE_UP),
    ],
)
def test_unknown_fields_survive_round_trip(
    message_type: type, known: object, unknown: bytes
) -> None:
    wire = known.SerializeToString() + unknown  # type: ignore[attr-defined]
    parsed = message_type.FromString(wire)  # type: ignore[attr-defined]
    assert parsed.SerializeToString() == wire
    parsed.DiscardUnknownFields()
    assert parsed == known  # the declared part parsed as usual
    assert parsed.SerializeToString() != wire  # so the first assert saw the unknown bytes


def test_unknown_fields_survive_nested_edit() -> None:
    """The relay edits cpusets deep inside CreateContainerRequest; fields it
    does not know, at every depth, must still reach the runtime."""
    resources = cri_pb2.LinuxContainerResources(cpu_shares=2).SerializeToString() + HUGEPAGES
    linux = _len_field(1, resources)
    config = (
        cri_pb2.ContainerConfig(metadata=cri_pb2.ContainerMetadata(name="app")).SerializeToString()
        + _len_field(15, linux)
        + CDI_DEVICE
    )
    request = _len_field(1, b"pod-1") + _len_field(2, config) + MADE_UP

    parsed = cri_pb2.CreateContainerRequest.FromString(request)
    parsed.config.linux.resources.cpuset_cpus = "4-7"
    out = cri_pb2.CreateContainerRequest.FromString(parsed.SerializeToString())

    assert out.config.linux.resources.cpuset_cpus == "4-7"
    assert out.config.linux.resources.cpu_shares == 2
    for blob in (HUGEPAGES, CDI_DEVICE, MADE_UP):
        assert blob in parsed.SerializeToString()


def test_field_numbers_match_upstream() -> None:
    """Spot-check the numbers the agent depends on against cri-wire-facts.md."""
    expected = {
        "ContainerConfig": {"metadata": 1, "labels": 9, "annotations": 10, "linux": 15},
        "LinuxContainerResources": {
            "cpu_period": 1,
            "cpu_quota": 2,
            "cpu_shares": 3,
            "memory_limit_in_bytes": 4,
            "cpuset_cpus": 6,
            "cpuset_mems": 7,
            "memory_swap_limit_in_bytes": 10,
        },
        "CreateContainerRequest": {"pod_sandbox_id": 1, "config": 2, "sandbox_config": 3},
        "PodSandboxConfig": {"metadata": 1, "labels": 6, "annotations": 7, "linux": 8},
        "LinuxPodSandboxConfig": {"cgroup_parent": 1, "resources": 5},
        "ContainerStatus": {"state": 3, "resources": 16, "image_id": 17},
        "UpdateContainerResourcesRequest": {"container_id": 1, "linux": 2, "annotations": 4},
        "Container": {"state": 6, "labels": 8, "image_id": 10},
        "ContainerFilter": {"state": 2, "pod_sandbox_id": 3, "label_selector": 4},
        "ImageSpec": {"image": 1, "user_specified_image": 18, "image_ref": 20},
    }
    fdp = descriptor_pb2.FileDescriptorProto()
    cri_pb2.DESCRIPTOR.CopyToProto(fdp)
    declared = {m.name: {f.name: f.number for f in m.field} for m in fdp.message_type}
    for message, fields in expected.items():
        for name, number in fields.items():
            assert declared[message][name] == number, f"{message}.{name}"
    assert cri_pb2.CONTAINER_EXITED == 2
    assert cri_pb2.SANDBOX_NOTREADY == 1
