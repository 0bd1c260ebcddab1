"""`numa-agent simulate`: run scenarios of pods through the node agent and an in-memory runtime.

scenario.py parses and validates the YAML, machine.py builds the Machine,
driver.py replays the events through the agent's CRI handlers, output.py prints.
"""
