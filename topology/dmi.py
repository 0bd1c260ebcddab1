"""The firmware's description of the machine (DMI/SMBIOS): who made it, what it is.

Read from `<sysfs>/class/dmi/id/` once, at the edge, for the node labels
(`agent.labels`): a hypervisor's name there means a VM, and on hardware
`product_uuid` identifies the physical machine. Every file may be missing (no
DMI on many ARM boards and some VMs) or unreadable (`product_uuid` is root's).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from topology.reads import note

DMI_DIR = Path("class") / "dmi" / "id"


@dataclass(frozen=True, slots=True)
class Dmi:
    """The DMI strings the labels use; None: the file is missing or unreadable."""

    sys_vendor: str | None = None
    product_name: str | None = None
    product_uuid: str | None = None


def _read(path: Path) -> str | None:
    try:
        text = path.read_text(errors="replace").strip()
        note(path)
        return text
    except OSError:  # missing, or root's (product_uuid) when not root
        return None


def read_dmi(root: str | Path) -> Dmi:
    """`<root>/class/dmi/id/{sys_vendor,product_name,product_uuid}`, whatever is readable."""
    base = Path(root) / DMI_DIR
    return Dmi(
        sys_vendor=_read(base / "sys_vendor"),
        product_name=_read(base / "product_name"),
        product_uuid=_read(base / "product_uuid"),
    )
