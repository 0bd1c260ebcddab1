"""Which of a pod's annotations the agent keeps: the ones it reads, nothing else.

Kubernetes allows 256 KiB of annotations per pod (last-applied-configuration alone
is often kilobytes), and every kept byte is held in memory and written to the
state file. Shared by the node agent (describe.py) and the state schema (reading
old files), so neither layer imports the other.
"""

from __future__ import annotations

from collections.abc import Mapping

from agent.affinity import ANNOTATION_AFFINITY, ANNOTATION_ANTI_AFFINITY
from agent.policy.request import PREFER_ISOLATED, PREFER_SHARED

READ_ANNOTATIONS = frozenset({ANNOTATION_AFFINITY, ANNOTATION_ANTI_AFFINITY})
READ_ANNOTATION_PREFIXES = (f"{PREFER_SHARED}/", f"{PREFER_ISOLATED}/", "numa-agent.io/")


def read_annotations(annotations: Mapping[str, str]) -> dict[str, str]:
    """The annotations of a pod the agent reads (see READ_ANNOTATIONS)."""
    return {
        key: value
        for key, value in annotations.items()
        if key in READ_ANNOTATIONS or key.startswith(READ_ANNOTATION_PREFIXES)
    }
