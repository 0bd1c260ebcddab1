"""Which physical machine is this node on? An identifier, salted and hashed before it leaves.

Replicas are only apart if their nodes are on different hardware. On hardware
the firmware's `product_uuid` names the machine; in a VM it names the VM, so
only the provider knows the host and says so with `physical_host_id`, which
wins. The label is HMAC-SHA256(label_salt, id) cut to 16 hex characters: equal
for two nodes on one machine, different across machines, and the raw id (a
serial number, or the provider's inventory name) never reaches the cluster.
"""

from __future__ import annotations

import hashlib
import hmac
from dataclasses import dataclass

from topology.dmi import Dmi

HASH_CHARS = 16

# UUIDs boards ship with when nobody set one: they would make unrelated machines
# look like one.
PLACEHOLDER_UUIDS = frozenset(
    {
        "00000000-0000-0000-0000-000000000000",
        "ffffffff-ffff-ffff-ffff-ffffffffffff",
        "03000200-0400-0500-0006-000700080009",
    }
)


@dataclass(frozen=True, slots=True)
class HostId:
    """The physical machine's raw id (never printed) and where it came from."""

    raw: str
    source: str


@dataclass(frozen=True, slots=True)
class NoHostId:
    """Why there is no physical-host label."""

    reason: str


def physical_host(dmi: Dmi, virtual: bool | None, configured: str | None) -> HostId | NoHostId:
    """The id to hash: `configured` (physical_host_id, already read) when given, else
    DMI's product_uuid on hardware; NoHostId with the reason otherwise."""
    if configured:
        return HostId(configured, "physical_host_id")
    if virtual is None:
        return NoHostId(
            "no DMI vendor or product to tell hardware from a VM, and no physical_host_id"
        )
    if virtual:
        return NoHostId(
            f"DMI describes a VM ({dmi.sys_vendor} {dmi.product_name}), not its host; "
            "set physical_host_id"
        )
    uuid = (dmi.product_uuid or "").strip().lower()
    if not uuid:
        return NoHostId("DMI product_uuid is missing or unreadable (it is root's)")
    if uuid in PLACEHOLDER_UUIDS:
        return NoHostId(f"DMI product_uuid is a placeholder ({uuid}) the firmware never set")
    return HostId(uuid, "DMI product_uuid")


def host_hash(raw: str, salt: str) -> str:
    """HMAC-SHA256 of `raw` keyed with `salt`, as 16 lowercase hex characters."""
    digest = hmac.new(salt.encode(), raw.encode(), hashlib.sha256).hexdigest()
    return digest[:HASH_CHARS]
