"""Topology-aware placement: which pool, CPUs and memory nodes each container gets.

Pure code over `topology.tree.Machine` and `agent.workload` values; the relay
and `simulate` drive it through `agent.policy.policy.Policy`.
"""
