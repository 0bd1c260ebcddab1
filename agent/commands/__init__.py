"""Sub-commands of the numa-agent CLI, one module each."""
