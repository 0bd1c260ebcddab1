"""The rule model both annotation languages compile into.

cri-resource-manager's affinity annotations (agent.affinity) and Kubernetes'
affinity shapes in numa-agent.io annotations (agent.rules) are two ways of
writing the same thing: a `Term` says whom it concerns (a selector over pods or
containers), where it holds (a level of the machine, or by closeness), how binding
it is (required or preferred) and its weight. The operators both languages select
with are one `Operator` with one meaning (operator.py). Placement evaluates terms
(agent.policy.evaluation) without knowing which language wrote them.

Nothing here imports the parsers, so both can import this.
"""
