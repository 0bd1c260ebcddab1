"""Copy the sysfs files the agent reads into a directory: a machine to attach to a
bug report, or for `simulate` and `--sysfs-root` to place on.

What is copied is what the readers noted while reading (`topology.reads`), not
a list kept beside them. Symlinks on the way to a file (sysfs has many:
class/net/<if>, its `device`, cpuN/cpufreq) are made again as the same
relative links, never followed out of the root; everything else is a plain
copy of the file's text. DMI's product_uuid is left out: it names the machine,
and a capture is meant to be shared (the labels read it; a capture's labels
then lack physical-host).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from topology.dmi import read_dmi
from topology.reads import recording
from topology.sysfs import REAL_SYSFS, SysfsError, read_machine

# Read by the agent, but identifying: not put in a capture.
PRIVATE = frozenset({PurePosixPath("class/dmi/id/product_uuid")})


class CaptureError(ValueError):
    """The capture cannot be written; the message names the path."""


@dataclass(frozen=True, slots=True)
class Captured:
    files: tuple[PurePosixPath, ...]  # as read, relative to the root
    links: tuple[PurePosixPath, ...]  # symlinks made again, relative to the destination
    skipped: tuple[Path, ...]  # read outside the root (a kernel without NUMA: /proc/meminfo)


def files_read(root: str | Path = REAL_SYSFS) -> list[Path]:
    """Every file the topology reader and the DMI reader open under `root`, in order."""
    with recording() as reads:
        read_machine(root, cpu_info=False)
        read_dmi(root)
    return reads


def capture(root: str | Path, dest: str | Path) -> Captured:
    """Copy what the agent reads from `root` into `dest` (which must be new or empty)."""
    root, dest = Path(root), Path(dest)
    if dest.exists() and (not dest.is_dir() or any(dest.iterdir())):
        raise CaptureError(f"{dest}: exists and is not an empty directory")
    try:
        reads = files_read(root)
    except SysfsError as exc:
        raise CaptureError(str(exc)) from exc
    files: list[PurePosixPath] = []
    links: set[PurePosixPath] = set()
    skipped: list[Path] = []
    for path in reads:
        try:
            rel = PurePosixPath(path.relative_to(root))
        except ValueError:
            skipped.append(path)
            continue
        if rel in PRIVATE:
            continue
        _copy(root, dest, rel, links)
        files.append(rel)
    return Captured(tuple(files), tuple(sorted(links)), tuple(skipped))


def _copy(root: Path, dest: Path, rel: PurePosixPath, links: set[PurePosixPath]) -> None:
    """Copy root/rel to dest, making each symlink on the way again instead of following it."""
    here = PurePosixPath()
    parts = list(rel.parts)
    hops = 0
    while parts:
        part = parts.pop(0)
        source = root / here / part
        if source.is_symlink():
            hops += 1
            if hops > 40:
                raise CaptureError(f"{source}: too many levels of symbolic links")
            target = os.readlink(source)
            resolved = PurePosixPath(os.path.normpath(here / target))
            if os.path.isabs(target) or resolved.parts[:1] == ("..",):
                raise CaptureError(f"{source}: links out of {root} ({target})")
            link = dest / here / part
            if not link.is_symlink():
                link.parent.mkdir(parents=True, exist_ok=True)
                link.symlink_to(target)
                links.add(here / part)
            # Walk on from the link's target, inside the root.
            parts = list(resolved.parts) + parts
            here = PurePosixPath()
            continue
        here = here / part
    out = dest / here
    out.parent.mkdir(parents=True, exist_ok=True)
    try:
        data = (root / here).read_bytes()
    except OSError as exc:
        raise CaptureError(f"{root / here}: cannot read: {exc.strerror or exc}") from exc
    out.write_bytes(data)
