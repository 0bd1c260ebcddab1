"""numa-agent as an NRI plugin: the runtime's Node Resource Interface as a second
front door onto the same node agent (see docs/install.md)."""
