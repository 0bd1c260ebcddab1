"""Labels that tell the cluster what this node is, and what each of its NUMA nodes is.

Node labels (`node.py`) go to Node Feature Discovery through a feature file the
daemon keeps current (`feature_file.py`); NUMA-node labels (`numa.py`) are what
node affinity inside the machine selects on; `nrt.py` is the NodeResourceTopology
object. Everything here is pure over a `Machine` except the feature file writer
and `sources.py`, which reads the physical host's id.
"""

PREFIX = "numa-agent.io/"
