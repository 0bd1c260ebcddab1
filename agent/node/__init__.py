"""The node agent: CRI calls that matter turned into placement decisions and runtime updates.

`NodeAgent` (agent.py) serves the relay's hooks and `simulate` alike; the rest
of the package holds its parts (request decoding, runtime access, updates, state).
"""
