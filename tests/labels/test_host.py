"""The physical-host label: where the id comes from, and the salted hash that hides it."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from agent.labels.host import PLACEHOLDER_UUIDS, HostId, NoHostId, host_hash, physical_host
from agent.labels.sources import LabelSourceError, configured_host_id
from agent.labels.virtual import is_virtual
from topology.dmi import Dmi

UUID = "4C4C4544-0044-5910-8034-C3C04F335632"
HARDWARE = Dmi("Dell Inc.", "PowerEdge R740", UUID)
VM = Dmi("QEMU", "Standard PC (Q35 + ICH9, 2009)", "8a3c5e0e-1f1d-4b6a-9d55-4a0c2a1f7e01")


@pytest.mark.parametrize(
    ("dmi", "configured", "expect"),
    [
        # Hardware: its own UUID (case-normalized: kernels differ in case).
        (HARDWARE, None, HostId(UUID.lower(), "DMI product_uuid")),
        # The provider's id wins, on hardware and in VMs.
        (HARDWARE, "host-17", HostId("host-17", "physical_host_id")),
        (VM, "host-17", HostId("host-17", "physical_host_id")),
        (Dmi(), "host-17", HostId("host-17", "physical_host_id")),
        # A VM's DMI names the VM: no label without the provider.
        (VM, None, NoHostId("set physical_host_id")),
        (Dmi(), None, NoHostId("no DMI vendor or product")),
        (Dmi("Dell Inc.", "PowerEdge R740", None), None, NoHostId("unreadable (it is root's)")),
        (Dmi("Dell Inc.", "PowerEdge R740", " "), None, NoHostId("missing or unreadable")),
    ]
    + [
        (Dmi("MSI", "MS-7D25", placeholder.upper()), None, NoHostId("placeholder"))
        for placeholder in sorted(PLACEHOLDER_UUIDS)
    ],
)
def test_source(dmi: Dmi, configured: str | None, expect: HostId | NoHostId) -> None:
    found = physical_host(dmi, is_virtual(dmi), configured)
    if isinstance(expect, HostId):
        assert found == expect
    else:
        assert isinstance(found, NoHostId)
        assert expect.reason in found.reason


def test_hash_is_16_hex_equal_per_id_and_salt_and_hides_the_id() -> None:
    ids = [UUID.lower(), "host-17", "host-18", "rack7/host-0042"]
    salts = ["", "cluster-a", "cluster-b"]
    hashes = {(i, s): host_hash(i, s) for i in ids for s in salts}
    for (raw, salt), value in hashes.items():
        assert re.fullmatch(r"[0-9a-f]{16}", value)
        assert value == host_hash(raw, salt)  # two nodes on one machine agree
        assert raw not in value
    # Different machines differ, and the same machine differs under another salt.
    assert len(set(hashes.values())) == len(hashes)


def test_salt_and_id_are_not_interchangeable() -> None:
    # A keyed hash, not hash(salt + id): moving characters across does not collide.
    assert host_hash("ab", "c") != host_hash("b", "ca")
    assert host_hash("abc", "") != host_hash("bc", "a")


def test_configured_id_inline_and_from_a_file(tmp_path: Path) -> None:
    assert configured_host_id("") is None
    assert configured_host_id("  host-17 \n") == "host-17"
    path = tmp_path / "host-id"
    path.write_text("host-42\n")
    assert configured_host_id(f"file:{path}") == "host-42"
    path.write_text("host-43")  # read anew each time: a reload picks the change up
    assert configured_host_id(f"file:{path}") == "host-43"


@pytest.mark.parametrize(
    ("content", "says"),
    [(None, "cannot read"), ("", "is empty"), ("\n  \n", "is empty")],
)
def test_unusable_id_file_is_an_error_naming_it(
    tmp_path: Path, content: str | None, says: str
) -> None:
    path = tmp_path / "host-id"
    if content is not None:
        path.write_text(content)
    with pytest.raises(LabelSourceError) as err:
        configured_host_id(f"file:{path}")
    assert str(err.value).startswith("physical_host_id: ")
    assert str(path) in str(err.value) and says in str(err.value)
