"""The feature file: written atomically, readable by NFD whatever the umask, left alone
when unchanged, moved or removed with the setting, and never fatal."""

from __future__ import annotations

import logging
import os
import stat
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from agent.config import AgentConfig
from agent.labels.feature_file import FeatureFile, write_if_changed
from agent.labels.nfd import HEADER, parse_feature_file
from agent.labels.node import PHYSICAL_HOST
from topology.dmi import read_dmi
from topology.tree import Machine


@contextmanager
def umask(mask: int) -> Iterator[None]:
    old = os.umask(mask)
    try:
        yield
    finally:
        os.umask(old)


def test_writes_creating_directories_readable_by_all(tmp_path: Path) -> None:
    path = tmp_path / "etc/kubernetes/node-feature-discovery/features.d/numa-agent"
    with umask(0o077):  # stricter than the unit's 0027
        assert write_if_changed(path, "a=1\n") is True
    assert path.read_text() == "a=1\n"
    assert stat.S_IMODE(path.stat().st_mode) == 0o644
    for directory in (path.parent, path.parent.parent, tmp_path / "etc"):
        assert stat.S_IMODE(directory.stat().st_mode) == 0o755, directory
    assert sorted(p.name for p in path.parent.iterdir()) == ["numa-agent"]  # no temp file left


def test_unchanged_text_is_not_rewritten(tmp_path: Path) -> None:
    path = tmp_path / "numa-agent"
    write_if_changed(path, "a=1\n")
    before = path.stat()
    assert write_if_changed(path, "a=1\n") is False
    after = path.stat()
    assert (after.st_ino, after.st_mtime_ns) == (before.st_ino, before.st_mtime_ns)
    assert write_if_changed(path, "a=2\n") is True
    # Replaced by a rename, not rewritten in place: readers see the old or the new file.
    assert path.stat().st_ino != before.st_ino
    assert path.read_text() == "a=2\n"


def test_a_reader_never_sees_a_partial_file(tmp_path: Path) -> None:
    path = tmp_path / "numa-agent"
    versions = [f"# v{i}\n" + "".join(f"x{j}=v{i}\n" for j in range(400)) for i in range(2)]
    write_if_changed(path, versions[0])
    seen: set[str] = set()
    stop = threading.Event()

    def read() -> None:
        while not stop.is_set():
            seen.add(path.read_text())

    reader = threading.Thread(target=read)
    reader.start()
    try:
        for i in range(200):
            write_if_changed(path, versions[i % 2 == 0])
    finally:
        stop.set()
        reader.join()
    assert seen <= set(versions), "a reader saw a file that was neither version"


@pytest.fixture
def machine_and_root(
    shape_root: Callable[[str], Path], shape_machine: Callable[[str], Machine]
) -> tuple[Machine, Path]:
    return shape_machine("xeon-2s-2numa"), shape_root("xeon-2s-2numa")


def test_update_writes_the_labels_and_follows_the_setting(
    tmp_path: Path, machine_and_root: tuple[Machine, Path]
) -> None:
    machine, root = machine_and_root
    feature = FeatureFile(machine, read_dmi(root))
    first = tmp_path / "a/numa-agent"
    config = AgentConfig(feature_file=str(first), label_salt="one")
    feature.update(config)
    text = first.read_text()
    assert text.startswith(HEADER + "\n")
    assert parse_feature_file(text) == feature.labels(config)
    # Another salt: another hash, the file rewritten.
    feature.update(AgentConfig(feature_file=str(first), label_salt="two"))
    assert (
        parse_feature_file(first.read_text())[PHYSICAL_HOST]
        != parse_feature_file(text)[PHYSICAL_HOST]
    )
    # Moved: the old file goes, the new one comes; turned off: it goes too.
    second = tmp_path / "b/numa-agent"
    feature.update(AgentConfig(feature_file=str(second)))
    assert not first.exists() and second.exists()
    feature.update(AgentConfig(feature_file=""))
    assert not second.exists()


def test_failures_are_logged_never_raised(
    tmp_path: Path, machine_and_root: tuple[Machine, Path], caplog: pytest.LogCaptureFixture
) -> None:
    machine, root = machine_and_root
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("")
    feature = FeatureFile(machine, read_dmi(root))
    with caplog.at_level(logging.INFO):
        feature.update(AgentConfig(feature_file=str(blocker / "numa-agent")))
        feature.update(
            AgentConfig(
                feature_file=str(tmp_path / "numa-agent"),
                physical_host_id=f"file:{tmp_path / 'missing'}",
            )
        )
    messages = [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR]
    assert messages[0].startswith(
        f"cannot write the feature file {blocker / 'numa-agent'}: Not a directory ({blocker}); "
    )
    # Nothing was written there, so nothing is removed when the setting moves on.
    assert messages[1] == (
        f"physical_host_id: cannot read {tmp_path / 'missing'}: No such file or directory; "
        f"the node labels go out without {PHYSICAL_HOST}"
    )
    assert len(messages) == 2
    # Hardware, but the provider's id is unreadable: no label rather than DMI's.
    written = parse_feature_file((tmp_path / "numa-agent").read_text())
    assert PHYSICAL_HOST not in written and written["numa-agent.io/virtual"] == "false"
