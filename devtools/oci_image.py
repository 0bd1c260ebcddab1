"""An offline OCI image holding the host's static busybox, built without docker or a registry.

Owns the image layout (oci-layout, index.json, manifest, config, one plain tar layer) that
the end-to-end tests and `make demo` import into containerd as app and sandbox image, and
the one builder of a busybox image's layer, config and manifest, which the local registry
(registry.py) serves too.
"""

from __future__ import annotations

import hashlib
import io
import json
import platform
import tarfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

BUSYBOX_IMAGE = "localhost/numa-agent/busybox:1"
BUSYBOX_PATHS = (Path("/bin/busybox"), Path("/usr/bin/busybox"))

# The applets tests and the demo call; busybox picks the applet from argv[0].
APPLETS = (
    "cat", "echo", "grep", "ls", "mkdir", "nproc", "ps", "sh", "sleep", "taskset", "true",
)  # fmt: skip

# A sandbox (pause) container must run until containerd kills it; pid 1 ignores
# SIGTERM without a handler, and containerd stops sandboxes with SIGKILL anyway.
DEFAULT_CMD = ("/bin/sleep", "infinity")

_MEDIA_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
_MEDIA_CONFIG = "application/vnd.oci.image.config.v1+json"
_MEDIA_LAYER = "application/vnd.oci.image.layer.v1.tar"
_GO_ARCH = {"x86_64": "amd64", "aarch64": "arm64", "armv7l": "arm", "ppc64le": "ppc64le"}


class ImageBuildError(RuntimeError):
    """The image cannot be built on this host (no static busybox, unknown architecture)."""


@dataclass(frozen=True, slots=True)
class Blob:
    media_type: str
    data: bytes

    @property
    def digest(self) -> str:
        return "sha256:" + hashlib.sha256(self.data).hexdigest()

    def descriptor(self) -> dict[str, object]:
        return {"mediaType": self.media_type, "digest": self.digest, "size": len(self.data)}


def has_interpreter(elf: bytes) -> bool:
    """True when an ELF binary asks for a dynamic loader (it would not run in our image)."""
    if elf[:4] != b"\x7fELF":
        raise ImageBuildError("busybox is not an ELF binary")
    is64 = elf[4] == 2
    order: Literal["little", "big"] = "little" if elf[5] == 1 else "big"
    phoff = int.from_bytes(elf[32:40] if is64 else elf[28:32], order)
    entsize = int.from_bytes(elf[54:56] if is64 else elf[42:44], order)
    count = int.from_bytes(elf[56:58] if is64 else elf[44:46], order)
    pt_interp = 3
    return any(
        int.from_bytes(elf[phoff + i * entsize : phoff + i * entsize + 4], order) == pt_interp
        for i in range(count)
    )


def find_busybox() -> Path:
    for path in BUSYBOX_PATHS:
        if path.is_file():
            return path
    raise ImageBuildError(
        f"no busybox binary at {', '.join(map(str, BUSYBOX_PATHS))}: "
        "install Debian's busybox-static (apt-get install busybox-static)"
    )


def go_arch(machine: str | None = None) -> str:
    machine = machine or platform.machine()
    try:
        return _GO_ARCH[machine]
    except KeyError:
        raise ImageBuildError(f"no OCI architecture name known for machine {machine!r}") from None


def _tar_info(name: str, kind: bytes, mode: int, size: int = 0, link: str = "") -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type = kind
    info.mode = mode
    info.size = size
    info.linkname = link
    info.mtime = 0  # reproducible: the same busybox gives the same digests
    return info


def layer_tar(busybox: bytes, applets: tuple[str, ...] = APPLETS) -> bytes:
    """One uncompressed layer: /bin/busybox, applet symlinks, and the usual mount points."""
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for d in ("bin", "dev", "etc", "proc", "sys", "tmp"):
            tar.addfile(_tar_info(d, tarfile.DIRTYPE, 0o1777 if d == "tmp" else 0o755))
        tar.addfile(
            _tar_info("bin/busybox", tarfile.REGTYPE, 0o755, len(busybox)), io.BytesIO(busybox)
        )
        for applet in sorted(set(applets)):
            tar.addfile(_tar_info(f"bin/{applet}", tarfile.SYMTYPE, 0o777, link="busybox"))
    return out.getvalue()


def _json(obj: object) -> bytes:
    return json.dumps(obj, sort_keys=True, separators=(",", ":")).encode()


def layer_blob(busybox: bytes, applets: tuple[str, ...] = APPLETS) -> Blob:
    """The image's one layer (`layer_tar`) as a blob."""
    return Blob(_MEDIA_LAYER, layer_tar(busybox, applets))


def image_blobs(
    layer: Blob,
    *,
    cmd: tuple[str, ...] = DEFAULT_CMD,
    arch: str | None = None,
    labels: Mapping[str, str] | None = None,
) -> tuple[Blob, Blob]:
    """The manifest and config of a linux image of one uncompressed `layer` that runs
    `cmd`; `labels` go into the config (none: no Labels key, so the digest of an image
    without labels does not depend on this option)."""
    run: dict[str, object] = {"Cmd": list(cmd), "Env": ["PATH=/bin"], "WorkingDir": "/"}
    if labels is not None:
        run["Labels"] = dict(labels)
    config = Blob(
        _MEDIA_CONFIG,
        _json(
            {
                "architecture": arch or go_arch(),
                "os": "linux",
                "config": run,
                # An uncompressed layer's diff_id is its own digest.
                "rootfs": {"type": "layers", "diff_ids": [layer.digest]},
            }
        ),
    )
    manifest = Blob(
        _MEDIA_MANIFEST,
        _json(
            {
                "schemaVersion": 2,
                "mediaType": _MEDIA_MANIFEST,
                "config": config.descriptor(),
                "layers": [layer.descriptor()],
            }
        ),
    )
    return manifest, config


def image_layout(
    busybox: bytes,
    *,
    name: str = BUSYBOX_IMAGE,
    cmd: tuple[str, ...] = DEFAULT_CMD,
    arch: str | None = None,
) -> dict[str, bytes]:
    """Every file of the OCI image layout, by path inside the layout."""
    layer = layer_blob(busybox)
    manifest, config = image_blobs(layer, cmd=cmd, arch=arch)
    tag = name.rsplit(":", 1)[1] if ":" in name.rsplit("/", 1)[-1] else "latest"
    index = {
        "schemaVersion": 2,
        "manifests": [
            manifest.descriptor()
            | {
                "annotations": {
                    "io.containerd.image.name": name,
                    "org.opencontainers.image.ref.name": tag,
                }
            }
        ],
    }
    files = {
        "oci-layout": _json({"imageLayoutVersion": "1.0.0"}),
        "index.json": _json(index),
    }
    for blob in (layer, config, manifest):
        files["blobs/sha256/" + blob.digest.removeprefix("sha256:")] = blob.data
    return files


def write_layout_tar(files: dict[str, bytes], dest: Path) -> Path:
    dirs = sorted({"/".join(p.split("/")[:i]) for p in files for i in range(1, p.count("/") + 1)})
    with tarfile.open(dest, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for d in dirs:
            tar.addfile(_tar_info(d, tarfile.DIRTYPE, 0o755))
        for path, data in sorted(files.items()):
            tar.addfile(_tar_info(path, tarfile.REGTYPE, 0o644, len(data)), io.BytesIO(data))
    return dest


def build_busybox_image(
    dest: Path, *, name: str = BUSYBOX_IMAGE, busybox: Path | None = None
) -> Path:
    """Write the busybox image as an OCI layout tar at `dest`, ready for `ctr images import`."""
    binary = busybox or find_busybox()
    data = binary.read_bytes()
    if has_interpreter(data):
        raise ImageBuildError(
            f"{binary} is dynamically linked and would not run alone in an image: "
            "install Debian's busybox-static instead of busybox"
        )
    return write_layout_tar(image_layout(data, name=name), dest)
