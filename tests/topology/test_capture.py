"""`topology --capture`: exactly the files the agent reads, symlinks made again (never
followed out of the root), and the capture reads back as the same machine."""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable, Iterable
from pathlib import Path, PurePosixPath

import pytest

from agent.cli import main
from devtools.fakesysfs import write_sysfs
from topology.capture import CaptureError, capture, files_read
from topology.shapes import SHAPES, MachineSpec
from topology.sysfs import REAL_SYSFS, read_machine

from .conftest import fast_tmpdir


def regular_files(root: Path) -> set[str]:
    return {
        str(Path(dirpath, name).relative_to(root))
        for dirpath, _, names in os.walk(root)
        for name in names
        if not Path(dirpath, name).is_symlink()
    }


def symlinks(root: Path) -> dict[str, str]:
    out = {}
    for dirpath, dirnames, names in os.walk(root):
        for name in dirnames + names:
            path = Path(dirpath, name)
            if path.is_symlink():
                out[str(path.relative_to(root))] = os.readlink(path)
    return out


def resolved(root: Path, paths: Iterable[PurePosixPath | Path]) -> set[str]:
    """Where each path read ends up once the links on its way are followed."""
    base = root.resolve()
    return {str((root / p).resolve().relative_to(base)) for p in paths}


def json_of(capsys: pytest.CaptureFixture[str], root: Path) -> dict[str, object]:
    assert main(["topology", "--sysfs-root", str(root), "--json"]) == 0
    data: dict[str, object] = json.loads(capsys.readouterr().out)
    data.pop("cpu_model", None)  # from CPUID (py-cpuinfo) for /sys only, not from sysfs
    return data


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_a_capture_of_every_shape_reads_back_the_same(
    name: str, shape_root: Callable[[str], Path], tmp_path: Path
) -> None:
    root = shape_root(name)
    captured = capture(root, tmp_path / "cap")
    assert read_machine(tmp_path / "cap") == read_machine(root)
    # Exactly the files read, no others: reading the capture reads every file in it.
    got = regular_files(tmp_path / "cap")
    assert got == resolved(tmp_path / "cap", captured.files)
    again = [p.relative_to(tmp_path / "cap") for p in files_read(tmp_path / "cap")]
    assert got == resolved(tmp_path / "cap", again)
    assert len(got) < len(regular_files(root))  # the writer writes more than is read
    assert "devices/system/cpu/kernel_max" not in got
    assert "class/dmi/id/product_uuid" not in got  # read for labels, but it names the machine
    # The NICs' device links are links again, with the same targets.
    written = symlinks(root)
    for link, target in symlinks(tmp_path / "cap").items():
        assert written[link] == target
    nics = {f"class/net/{nic}/device" for nic, node in SHAPES[name].nics if node >= 0}
    assert set(symlinks(tmp_path / "cap")) >= nics


def test_this_machine_captured_reads_back_as_the_same_topology_json(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["topology", "--capture", str(tmp_path / "cap")])
    out = capsys.readouterr().out
    assert code == 0 and out.startswith("captured ")
    assert json_of(capsys, tmp_path / "cap") == json_of(capsys, REAL_SYSFS)
    again = [p.relative_to(tmp_path / "cap") for p in files_read(tmp_path / "cap")]
    assert regular_files(tmp_path / "cap") == resolved(tmp_path / "cap", again)


def kernel_like(spec: MachineSpec, root: Path) -> Path:
    """A written tree made to link as the kernel's does: class/net/<if> is a link into
    the PCI function's net/ directory (whose `device` links back up: a cycle), and
    cpuN/cpufreq is a link to cpufreq/policyN."""
    write_sysfs(spec, root)
    for netdev in sorted((root / "class" / "net").iterdir()):
        if not (netdev / "device").is_symlink():
            continue
        function = (netdev / "device").resolve()
        home = function / "net" / netdev.name
        home.parent.mkdir(parents=True)
        shutil.move(netdev, home)
        (home / "device").unlink()
        (home / "device").symlink_to("../..")
        netdev.symlink_to(os.path.relpath(home, netdev.parent))
    cpu_dir = root / "devices" / "system" / "cpu"
    for cpufreq in sorted(cpu_dir.glob("cpu[0-9]*/cpufreq")):
        policy = cpu_dir / "cpufreq" / f"policy{cpufreq.parent.name[3:]}"
        policy.parent.mkdir(exist_ok=True)
        shutil.move(cpufreq, policy)
        cpufreq.symlink_to(os.path.relpath(policy, cpufreq.parent))
    return root


def test_links_on_the_way_are_made_again_not_followed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = MachineSpec(
        cores_per_numa=4, favoured_cores_per_numa=1, nics=(("eth0", 0), ("eth1", -1))
    )
    root = kernel_like(spec, tmp_path / "sys")
    machine = read_machine(root)
    assert str(machine.favoured_cpus) == "0,4" and [n.name for n in machine.nics] == ["eth0"]
    captured = capture(root, tmp_path / "cap")
    links = symlinks(tmp_path / "cap")
    assert links["class/net/eth0"] == "../../devices/pci0000:00/0000:18:00.0/net/eth0"
    assert links["devices/pci0000:00/0000:18:00.0/net/eth0/device"] == "../.."
    assert links["devices/system/cpu/cpu0/cpufreq"] == "../cpufreq/policy0"
    assert "devices/pci0000:00/0000:18:00.0/numa_node" in regular_files(tmp_path / "cap")
    # eth1's device reports -1: read, copied; lo has no device: nothing of it.
    assert not (tmp_path / "cap" / "class" / "net" / "lo").exists()
    assert len(captured.links) == len(links)
    assert read_machine(tmp_path / "cap") == machine
    assert json_of(capsys, tmp_path / "cap") == json_of(capsys, root)


def test_a_link_out_of_the_root_is_refused(tmp_path: Path) -> None:
    root = write_sysfs(MachineSpec(cores_per_numa=1, nics=(("eth0", 0),)), tmp_path / "sys")
    device = root / "class" / "net" / "eth0" / "device"
    device.unlink()
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "numa_node").write_text("0\n")
    device.symlink_to("../../../../outside")
    with pytest.raises(CaptureError, match=r"class/net/eth0/device: links out of"):
        capture(root, tmp_path / "cap")


def test_a_non_empty_destination_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with fast_tmpdir() as tmp:
        root = write_sysfs(MachineSpec(cores_per_numa=1), tmp / "sys")
        (tmp_path / "cap").mkdir()
        (tmp_path / "cap" / "mine").write_text("keep\n")
        code = main(["topology", "--sysfs-root", str(root), "--capture", str(tmp_path / "cap")])
    assert code == 1
    assert "cap: exists and is not an empty directory" in capsys.readouterr().err
    assert (tmp_path / "cap" / "mine").read_text() == "keep\n"
