"""What the node labels need beyond the Machine, read at the edge: the provider's host id.

`physical_host_id` is the id itself or `file:/path` to read it from (a file
the provider's tooling writes); it is read each time the labels are computed,
so a changed file takes effect on the next reload.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from agent.labels.host import NoHostId, host_hash, physical_host
from agent.labels.node import PHYSICAL_HOST, node_labels
from agent.labels.virtual import is_virtual
from topology.dmi import Dmi
from topology.tree import Machine

FILE_PREFIX = "file:"


class LabelSourceError(Exception):
    """The configured physical host id cannot be read; names the setting and the file."""


def configured_host_id(setting: str) -> str | None:
    """The provider's id from `physical_host_id` (None when unset); file: is read now."""
    if not setting.startswith(FILE_PREFIX):
        return setting.strip() or None
    path = Path(setting[len(FILE_PREFIX) :])
    try:
        value = path.read_text().strip()
    except OSError as err:
        raise LabelSourceError(
            f"physical_host_id: cannot read {path}: {err.strerror or err}"
        ) from None
    if not value:
        raise LabelSourceError(f"physical_host_id: {path} is empty")
    return value


@dataclass(frozen=True, slots=True)
class NodeLabels:
    """The node's labels, and whether the physical-host label is there (and why not)."""

    labels: dict[str, str]
    has_physical_host: bool
    note: str  # where the physical host id came from, or why there is none


def current_node_labels(
    machine: Machine, dmi: Dmi, *, physical_host_id: str, label_salt: str
) -> NodeLabels:
    """The node's labels now; LabelSourceError when physical_host_id names an unreadable file."""
    virtual = is_virtual(dmi)
    host = physical_host(dmi, virtual, configured_host_id(physical_host_id))
    if isinstance(host, NoHostId):
        return NodeLabels(
            node_labels(machine, virtual=virtual, physical_host=None),
            has_physical_host=False,
            note=f"no {PHYSICAL_HOST} label: {host.reason}",
        )
    return NodeLabels(
        node_labels(machine, virtual=virtual, physical_host=host_hash(host.raw, label_salt)),
        has_physical_host=True,
        note=f"{PHYSICAL_HOST} from {host.source}",
    )
