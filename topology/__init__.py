"""The machine as the agent sees it: CPU sets and the tree read from sysfs."""

from topology.cpuset import CPUSet, CPUSetError

__all__ = ["CPUSet", "CPUSetError"]
