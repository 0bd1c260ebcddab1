"""numa-agent: NUMA-aware container placement between kubelet and the CRI runtime."""

__version__ = "0.1.0"
