"""The offline busybox OCI image: a layout containerd can import, byte for byte reproducible."""

from __future__ import annotations

import hashlib
import io
import json
import struct
import tarfile
from pathlib import Path

import pytest

from devtools.oci_image import (
    APPLETS,
    ImageBuildError,
    build_busybox_image,
    go_arch,
    has_interpreter,
    image_blobs,
    image_layout,
    layer_blob,
)

FAKE_BUSYBOX = b"\x7fELF not really busybox"


def elf64(program_header_types: list[int]) -> bytes:
    """A little-endian ELF64 header followed by program headers of the given types."""
    phoff, phentsize = 64, 56
    header = bytearray(64)
    header[:6] = b"\x7fELF\x02\x01"
    struct.pack_into("<QHHH", header, 32, phoff, 0, 0, 0)
    struct.pack_into("<HH", header, 54, phentsize, len(program_header_types))
    table = b"".join(struct.pack("<I", t) + bytes(phentsize - 4) for t in program_header_types)
    return bytes(header) + table


def blob(files: dict[str, bytes], digest: str) -> bytes:
    algo, hexdigest = digest.split(":")
    assert algo == "sha256"
    data = files[f"blobs/sha256/{hexdigest}"]
    assert hashlib.sha256(data).hexdigest() == hexdigest, "blob content matches its name"
    return data


@pytest.mark.parametrize(
    ("name", "cmd", "tag"),
    [
        ("localhost/numa-agent/busybox:1", ("/bin/sleep", "infinity"), "1"),
        ("localhost:5000/pause", ("/bin/sh", "-c", "sleep 1"), "latest"),
    ],
)
def test_layout_descriptors_point_at_matching_blobs(
    name: str, cmd: tuple[str, ...], tag: str
) -> None:
    files = image_layout(FAKE_BUSYBOX, name=name, cmd=cmd, arch="amd64")
    assert json.loads(files["oci-layout"]) == {"imageLayoutVersion": "1.0.0"}
    (entry,) = json.loads(files["index.json"])["manifests"]
    assert entry["annotations"] == {
        "io.containerd.image.name": name,
        "org.opencontainers.image.ref.name": tag,
    }
    manifest_bytes = blob(files, entry["digest"])
    assert entry["size"] == len(manifest_bytes)
    manifest = json.loads(manifest_bytes)
    config = json.loads(blob(files, manifest["config"]["digest"]))
    (layer,) = manifest["layers"]
    layer_bytes = blob(files, layer["digest"])
    assert layer["size"] == len(layer_bytes)
    # Uncompressed layer: its diff_id is the digest of the bytes themselves.
    assert config["rootfs"] == {"type": "layers", "diff_ids": [layer["digest"]]}
    assert config["config"]["Cmd"] == list(cmd)
    assert (config["os"], config["architecture"]) == ("linux", "amd64")
    assert len(files) == 2 + 3  # oci-layout, index.json, manifest, config, layer


def test_the_layout_holds_the_images_the_registry_builder_makes() -> None:
    """One builder for the layout and the local registry: the layout's manifest is
    image_blobs' own, and labels (the registry's repository name) change the config
    and so the digest, but nothing else."""
    layer = layer_blob(FAKE_BUSYBOX)
    manifest, config = image_blobs(layer, arch="amd64")
    files = image_layout(FAKE_BUSYBOX, arch="amd64")
    (entry,) = json.loads(files["index.json"])["manifests"]
    assert entry["digest"] == manifest.digest
    assert blob(files, config.digest) == config.data
    assert "Labels" not in json.loads(config.data)["config"]
    named_manifest, named = image_blobs(layer, arch="amd64", labels={"repository": "a/b"})
    assert json.loads(named.data)["config"]["Labels"] == {"repository": "a/b"}
    assert named.digest != config.digest
    assert json.loads(named_manifest.data)["config"] == named.descriptor()
    assert json.loads(named_manifest.data)["layers"] == json.loads(manifest.data)["layers"]


def test_layer_holds_busybox_and_applet_links() -> None:
    files = image_layout(FAKE_BUSYBOX, arch="amd64")
    manifest = json.loads(blob(files, json.loads(files["index.json"])["manifests"][0]["digest"]))
    layer = blob(files, manifest["layers"][0]["digest"])
    with tarfile.open(fileobj=io.BytesIO(layer)) as tar:
        busybox = tar.getmember("bin/busybox")
        assert busybox.isfile() and busybox.mode == 0o755
        extracted = tar.extractfile(busybox)
        assert extracted is not None and extracted.read() == FAKE_BUSYBOX
        for applet in APPLETS:
            link = tar.getmember(f"bin/{applet}")
            assert link.issym() and link.linkname == "busybox"
        assert tar.getmember("tmp").mode == 0o1777


def test_same_binary_gives_the_same_image(tmp_path: Path) -> None:
    binary = tmp_path / "busybox"
    binary.write_bytes(elf64([1]))
    first = build_busybox_image(tmp_path / "a.tar", busybox=binary).read_bytes()
    second = build_busybox_image(tmp_path / "b.tar", busybox=binary).read_bytes()
    assert first == second


@pytest.mark.parametrize(
    ("types", "dynamic"),
    [([], False), ([1, 1, 4], False), ([6, 3, 1], True), ([3], True)],
)
def test_has_interpreter_reads_program_headers(types: list[int], dynamic: bool) -> None:
    assert has_interpreter(elf64(types)) is dynamic


def test_dynamic_busybox_is_refused_with_the_package_to_install(tmp_path: Path) -> None:
    binary = tmp_path / "busybox"
    binary.write_bytes(elf64([6, 3]))
    with pytest.raises(ImageBuildError, match="busybox-static"):
        build_busybox_image(tmp_path / "image.tar", busybox=binary)


def test_non_elf_busybox_is_refused(tmp_path: Path) -> None:
    binary = tmp_path / "busybox"
    binary.write_bytes(b"#!/bin/sh\n")
    with pytest.raises(ImageBuildError, match="not an ELF"):
        build_busybox_image(tmp_path / "image.tar", busybox=binary)


@pytest.mark.parametrize(("machine", "arch"), [("x86_64", "amd64"), ("aarch64", "arm64")])
def test_go_arch_names(machine: str, arch: str) -> None:
    assert go_arch(machine) == arch


def test_unknown_machine_is_named_in_the_error() -> None:
    with pytest.raises(ImageBuildError, match="'sparc64'"):
        go_arch("sparc64")
