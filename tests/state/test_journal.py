"""The state journal: a placement writes what changed, not the whole state; the file
and the journal together are the state; a save cut short loses only itself."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from agent.state.journal import JOURNAL_FILE, Journal, apply, changes, saved_payload
from agent.state.writer import MIN_JOURNAL_BYTES
from agent.workload import QoSClass
from tests.node.conftest import Node, NodeFactory


def busy(make_node: NodeFactory, state_dir: Path, pods: int) -> Node:
    node = make_node("epyc-2s-nps4", "inprocess", state_dir=state_dir)
    for n in range(pods):
        node.container(node.pod(f"web-{n}", QoSClass.BURSTABLE, labels={"app": "web"}), "main", 100)
    return node


def test_a_placement_writes_what_changed_not_the_whole_state(
    make_node: NodeFactory, tmp_path: Path
) -> None:
    node = busy(make_node, tmp_path, 60)
    state = tmp_path / "state.json"
    journal = tmp_path / JOURNAL_FILE
    file_before = state.stat().st_mtime_ns, state.stat().st_size
    journal_before = journal.stat().st_size
    node.container(node.pod("one-more", QoSClass.BURSTABLE), "main", 100)
    grew = journal.stat().st_size - journal_before
    whole = len(json.dumps(saved_payload(tmp_path)))
    # One pod and one container (about 1.5 KB), not 60 of them.
    assert 0 < grew < whole / 20, (grew, whole)
    assert (state.stat().st_mtime_ns, state.stat().st_size) == file_before


def test_the_file_and_the_journal_are_the_state(make_node: NodeFactory, tmp_path: Path) -> None:
    node = busy(make_node, tmp_path, 10)
    node.guaranteed("db", 4)
    node.kubelet.remove_container(node.agent.placements()[0].container_id)
    assert saved_payload(tmp_path) == {
        k: v for k, v in node.agent._books.payload().items() if k != "journal"
    }


def test_a_save_cut_short_loses_only_itself(make_node: NodeFactory, tmp_path: Path) -> None:
    first = busy(make_node, tmp_path, 5)
    _, db = first.guaranteed("db", 4)
    journal = tmp_path / JOURNAL_FILE
    whole = journal.read_bytes()
    lines = whole.splitlines(keepends=True)
    assert len(lines) >= 2
    # kill -9 in the middle of the last append: half a line.
    journal.write_bytes(b"".join(lines[:-1]) + lines[-1][: len(lines[-1]) // 2])
    kept = saved_payload(tmp_path)
    assert db not in kept["containers"]  # the last save (db's) is the one lost
    assert len(kept["containers"]) == 5
    # A restart takes back the rest from the file and reconciles db from the runtime.
    second = make_node("epyc-2s-nps4", "inprocess", runtime=first.runtime, state_dir=tmp_path)
    placed = {p.container_id: p for p in second.agent.placements()}
    assert placed[db].exclusive and placed[db].cpuset_cpus == first.cpus(db)


def test_lines_of_an_older_generation_are_ignored(tmp_path: Path) -> None:
    journal = Journal(tmp_path)
    journal.append("old", {"containers": {"a": {"x": 1}}})
    journal.append("new", {"containers": {"b": {"y": 2}}})
    payload = {"journal": "new", "containers": {"c": {"z": 3}}, "pods": {}}
    assert journal.replay(payload)["containers"] == {"c": {"z": 3}, "b": {"y": 2}}


def test_changes_and_apply_round_trip() -> None:
    old = {"pods": {"p": {"a": 1}}, "containers": {"c1": {"n": 1}, "c2": {"n": 2}}}
    new = {"pods": {"p": {"a": 1}}, "containers": {"c1": {"n": 9}, "c3": {"n": 3}}}
    diff = changes(old, new)
    assert diff == {"containers": {"c1": {"n": 9}, "c3": {"n": 3}, "c2": None}}
    assert apply(old, diff) == new


def test_the_journal_is_folded_into_the_file_when_it_grows(
    make_node: NodeFactory, tmp_path: Path
) -> None:
    node = busy(make_node, tmp_path, 2)
    writer = node.agent._writer
    full_before = writer.full_writes
    n = 0
    while writer.full_writes == full_before:
        node.container(node.pod(f"churn-{n}", QoSClass.BURSTABLE), "main", 10)
        n += 1
        assert n < 2000, "the journal was never folded into the state file"
    journal = tmp_path / JOURNAL_FILE  # gone if the fold was the last write
    assert not journal.exists() or journal.stat().st_size < MIN_JOURNAL_BYTES
    assert saved_payload(tmp_path) == {
        k: v for k, v in node.agent._books.payload().items() if k != "journal"
    }


def test_a_stopped_agent_leaves_one_whole_file(make_node: NodeFactory, tmp_path: Path) -> None:
    node = busy(make_node, tmp_path, 5)
    node.agent.close()
    assert not (tmp_path / JOURNAL_FILE).exists()
    assert len(json.loads((tmp_path / "state.json").read_text())["payload"]["containers"]) == 5


@pytest.mark.parametrize("kind", ["fifo", "symlink", "garbage"])
def test_a_hostile_journal_never_stops_the_agent(
    make_node: NodeFactory, tmp_path: Path, kind: str
) -> None:
    first = busy(make_node, tmp_path, 3)
    first.agent.close()
    journal = tmp_path / JOURNAL_FILE
    victim = tmp_path / "victim"
    victim.write_text("keep me")
    if kind == "fifo":
        os.mkfifo(journal)
    elif kind == "symlink":
        journal.symlink_to(victim)
    else:
        journal.write_bytes(b"\x00\xff not json\n")
    second = make_node("epyc-2s-nps4", "inprocess", runtime=first.runtime, state_dir=tmp_path)
    assert len(second.agent.placements()) == 3
    second.container(second.pod("after", QoSClass.BURSTABLE), "main", 100)
    assert victim.read_text() == "keep me"
