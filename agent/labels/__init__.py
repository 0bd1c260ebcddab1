"""Labels that tell the cluster what this node is, and what each of its NUMA nodes is.

Node labels (`node.py`, from the machine, `virtual.py` and `host.py`) go to Node
Feature Discovery through a feature file the daemon keeps current
(`feature_file.py`, format in `nfd.py`); NUMA-node labels (`numa.py`, plus the
operator's `numa_labels`, `operator_labels.py`) are what node affinity inside
the machine selects on; `nrt.py` (with `usage.py`) is the NodeResourceTopology
object. All pure over a `Machine` and read facts, except the feature file
writer and `sources.py`, which reads the provider's host id.
"""

PREFIX = "numa-agent.io/"
