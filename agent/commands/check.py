"""`numa-agent check POD.yaml`: would the agent accept this pod's affinity annotations
(cri-resource-manager's and numa-agent.io's), and (--simulate) where would its
containers land on this node?"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass, replace
from pathlib import Path

from agent.affinity import (
    AnnotationError,
    Expression,
    Operator,
    container_selector,
    parse_pod_affinities,
    rule_text,
)
from agent.commands.options import add_config_flags, overrides
from agent.config import ConfigError, resolve_config
from agent.manifest import ManifestError, Workload, load_manifests
from agent.policy.classes import DRAM_FAR, mapping_names, parse_classes
from agent.policy.config import PolicyConfig
from agent.policy.errors import InvalidRequest
from agent.rules import (
    ANNOTATION_AFFINITY,
    ANNOTATION_SPREAD,
    PodRules,
    RuleError,
    TermKind,
    parse_pod_rules,
    reach_problems,
)
from agent.simulate.driver import SimulationError, SimulationResult, run_scenario
from agent.simulate.output import render_text
from agent.simulate.scenario import CreatePod, PodSpec, Scenario, SysfsTopology, pod_uid
from agent.terms.term import Term
from topology.sysfs import read_machine
from topology.tree import Machine


@dataclass(frozen=True, slots=True)
class Findings:
    errors: tuple[str, ...]  # what kubelet would get back: the agent's refusal messages
    warnings: tuple[str, ...]
    named: tuple[str, ...]  # containers the annotations name
    rules: tuple[tuple[str, Term], ...] = ()  # (container, rule) as the agent reads them


def check_affinities(pod: PodSpec) -> Findings:
    """The agent's verdict on each container of the pod, plus what looks wrong but passes."""
    parsed = parse_pod_affinities(pod.annotations)
    containers = [c.name for c in (*pod.init_containers, *pod.containers)]
    errors: list[str] = []
    rules: list[tuple[str, Term]] = []
    for name in containers:
        try:
            rules.extend((name, rule) for rule in parsed.rules_for(name))
        except AnnotationError as err:
            # The message the agent puts in its INVALID_ARGUMENT refusal (NodeAgent._rules).
            errors.append(f"cannot place container {name!r} of pod {pod.key}: {err}")
    named = sorted({*parsed.rules, *parsed.container_errors})
    warnings = [_absent(name, parsed.rules.get(name, ()), containers) for name in named]
    warnings = [w for w in warnings if w]
    warnings.extend(w for name, rule in rules for w in _doubtful(name, rule))
    warnings.extend(
        f"{err} (container {name!r} is not in this pod, so the agent never reads it)"
        for name, errs in parsed.container_errors.items()
        if name not in containers
        for err in errs
    )
    return Findings(tuple(errors), tuple(warnings), tuple(named), tuple(rules))


def _absent(name: str, rules: tuple[Term, ...], containers: list[str]) -> str:
    if name in containers:
        return ""
    have = f"which this pod does not have (containers: {', '.join(containers)})"
    if rules and all(r.mirrored for r in rules):
        owners = ", ".join(repr(o) for r in rules for o in container_selector(r).match.values)
        return f"the shorthand of {owners} names container {name!r}, {have}; it acts on nothing"
    return f"the annotations name container {name!r}, {have}; its rules apply to nothing"


_WILDCARD_OPERATORS = (Operator.EQUALS, Operator.IN, Operator.NOT_IN)


def _doubtful(name: str, rule: Term) -> list[str]:
    """What the agent accepts but probably is not what the author meant."""
    found: list[str] = []
    selector = container_selector(rule)
    expressions: list[tuple[str, Expression]] = [("match", selector.match)]
    if selector.scope is not None:
        expressions.append(("scope", selector.scope))
    for part, expr in expressions:
        where = f"container {name!r}, {rule.source} {part} {expr}"
        negative = expr.operator in (Operator.MATCHES_NOT, Operator.MATCHES_NONE)
        found.extend(
            f"{where}: pattern {glob.pattern!r} {glob.error}, so it matches nothing"
            + (f" and never makes {expr.operator.value} false" if negative else "")
            + " (as in cri-resource-manager, which ignores Go's pattern errors)"
            for glob in expr.malformed_globs()
        )
        if expr.operator in _WILDCARD_OPERATORS and "*" in expr.values:
            found.append(
                f'{where}: "*" is compared as it is; cri-resource-manager took it for any '
                "value: for that write Exists (or Matches with a pattern)"
            )
    return found


@dataclass(frozen=True, slots=True)
class RuleFindings:
    errors: tuple[str, ...]  # the agent's refusal of each container, as for the others
    warnings: tuple[str, ...]
    summary: str | None  # what the numa-agent.io annotations ask; None without any


def check_rules(
    workload: Workload, exclusive_domain_namespaces: tuple[str, ...] = ()
) -> RuleFindings:
    """The agent's verdict on the numa-agent.io annotations (they concern every
    container of the pod alike), and the pod spec's own rules that name
    numa-agent.io keys the cluster scheduler does not know."""
    pod = workload.pod
    containers = [c.name for c in (*pod.init_containers, *pod.containers)]
    errors: list[str] = []
    summary = None
    try:
        rules = parse_pod_rules(pod.annotations)
    except RuleError as err:
        errors = [f"cannot place {err.render(pod=pod.key, container=name)}" for name in containers]
    else:
        summary = None if rules.is_empty else describe_rules(rules)
        # No tenant can close the node (agent.rules.guard): refused at CreateContainer.
        errors = [
            f"cannot place container {name!r} of pod {pod.key}: {problem}"
            for problem in reach_problems(rules, pod.namespace, exclusive_domain_namespaces)
            for name in containers
        ]
    warnings = [
        f"{path} is {key!r}, a key of the machine's parts that no node carries, so the "
        "cluster scheduler cannot apply this rule as meant (required pod or node affinity and "
        "DoNotSchedule spreading leave the pod Pending; anti-affinity does nothing); rules "
        f"inside the node go in the {_annotation_for(path)} annotation"
        for path, key in workload.node_local_keys
    ]
    return RuleFindings(tuple(errors), tuple(warnings), summary)


def _annotation_for(path: str) -> str:
    return ANNOTATION_SPREAD if ".topologySpreadConstraints[" in path else ANNOTATION_AFFINITY


def describe_rules(rules: PodRules) -> str:
    """`1 required anti-affinity term, 1 preferred affinity term; node affinity
    (1 required term, 1 preferred); 1 spread constraint`."""
    parts = []
    for required in (True, False):
        for kind in TermKind:
            count = len(rules.terms(kind, required=required))
            if count:
                strength = "required" if required else "preferred"
                parts.append(f"{count} {strength} {kind} term{'s' if count > 1 else ''}")
    text = ", ".join(parts)
    node = rules.node_affinity
    if node is not None:
        counts = []
        if node.required is not None:
            counts.append(
                f"{len(node.required)} required term{'s' if len(node.required) > 1 else ''}"
            )
        if node.preferred:
            counts.append(f"{len(node.preferred)} preferred")
        text += ("; " if text else "") + f"node affinity ({', '.join(counts)})"
    if rules.spread:
        count = len(rules.spread)
        text += ("; " if text else "") + f"{count} spread constraint{'s' if count > 1 else ''}"
    return text


def replica_pods(workload: Workload) -> tuple[PodSpec, ...]:
    """The pods a workload makes; replicas get -0, -1, ... suffixes and their own UIDs."""
    pod = workload.pod
    if workload.kind == "Pod" or workload.replicas == 1:
        return (pod,)
    return tuple(
        replace(pod, name=f"{pod.name}-{i}", uid=pod_uid(pod.namespace, f"{pod.name}-{i}"))
        for i in range(workload.replicas)
    )


def simulate(
    workloads: tuple[Workload, ...],
    machine: Machine,
    config: PolicyConfig,
    sysfs_root: str,
    source: str = "check",
) -> SimulationResult:
    pods = tuple(p for w in workloads for p in replica_pods(w))
    scenario = Scenario(
        source=source,
        description="",
        topology=SysfsTopology(Path(sysfs_root)),
        config=config,
        pods=pods,
        events=tuple(CreatePod(p.key) for p in pods),
    )
    return run_scenario(scenario, machine)


def check_classes(pod: PodSpec) -> RuleFindings:
    """The agent's verdict on numa-agent.io/cpu-class and memory-tiers for each container
    (whether the machine has efficiency cores is known only with --simulate)."""
    containers = [c.name for c in (*pod.init_containers, *pod.containers)]
    errors: list[str] = []
    asked: list[str] = []
    for name in containers:
        try:
            got = parse_classes(pod.annotations, name)
        except InvalidRequest as err:
            # The message of the agent's INVALID_ARGUMENT refusal (Policy.place).
            errors.append(f"cannot place container {name!r} of pod {pod.key}: {err}")
            continue
        if got.cpu_class is not None or got.memory_tiers != DRAM_FAR:
            asked.append(f"{name}: cpu-class {got.cpu_class or 'default'}, {got.memory_tiers}")
    warnings = [
        f"{key} names container {name!r}, which this pod does not have "
        f"(containers: {', '.join(containers)}); it applies to nothing"
        for key, names in mapping_names(pod.annotations).items()
        for name in names
        if name not in containers
    ]
    return RuleFindings(tuple(errors), tuple(warnings), "; ".join(asked) or None)


def _report(
    workload: Workload,
    findings: Findings,
    rules: RuleFindings,
    classes: RuleFindings = RuleFindings((), (), None),
) -> list[str]:
    pod = workload.pod
    what = f"{workload.kind} {pod.key}"
    if workload.kind != "Pod":
        what += f" ({workload.replicas} replica{'s' if workload.replicas != 1 else ''})"
    lines = [what]
    init = ", ".join(c.name for c in pod.init_containers)
    lines.append(
        f"  containers: {', '.join(c.name for c in pod.containers)}"
        + (f"; init containers: {init}" if init else "")
        + f"; QoS {pod.qos}"
    )
    if findings.named:
        lines.append(f"  affinity annotations name: {', '.join(findings.named)}")
    elif rules.summary is None and not rules.errors:
        lines.append("  no affinity annotations")
    lines.extend(f"  rule of {name}: {rule_text(rule)}" for name, rule in findings.rules)
    if rules.summary is not None:
        lines.append(f"  numa-agent.io rules: {rules.summary}")
    if classes.summary is not None:
        lines.append(f"  kinds of core and memory: {classes.summary}")
    lines.extend(
        f"  warning: {w}" for w in (*findings.warnings, *rules.warnings, *classes.warnings)
    )
    lines.extend(f"  error: {e}" for e in (*findings.errors, *rules.errors, *classes.errors))
    if not findings.errors and not rules.errors and not classes.errors:
        lines.append("  ok: the agent accepts the annotations for every container")
    return lines


def _check(args: argparse.Namespace) -> int:
    try:
        workloads = load_manifests(args.manifest)
        config = resolve_config(args.config, overrides(args))
    except (ManifestError, ConfigError) as err:
        print(f"numa-agent check: {err}", file=sys.stderr)
        return 2
    failed = False
    lines: list[str] = []
    for workload in workloads:
        findings = check_affinities(workload.pod)
        rules = check_rules(workload, config.policy.exclusive_domain_namespaces)
        classes = check_classes(workload.pod)
        failed = failed or bool(findings.errors) or bool(rules.errors) or bool(classes.errors)
        lines.extend(_report(workload, findings, rules, classes))
    print("\n".join(lines))
    if args.simulate:
        try:
            machine = read_machine(config.sysfs_root, cpu_info=False)
        except (OSError, ValueError) as err:
            print(f"numa-agent check: cannot read {config.sysfs_root}: {err}", file=sys.stderr)
            return 2
        try:
            result = simulate(workloads, machine, config.policy, config.sysfs_root, args.manifest)
        except SimulationError as err:
            print(f"numa-agent check: simulation failed: {err}", file=sys.stderr)
            return 2
        print(f"\nwhere they would land on an empty {config.sysfs_root} machine:")
        print(render_text(result), end="")
        failed = failed or bool(result.errors)
    return 1 if failed else 0


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "check",
        help="check a pod manifest's affinity annotations (and simulate where it lands)",
        description="Read a Kubernetes manifest (Pod, or the pod template of a Deployment, "
        "StatefulSet, DaemonSet, ReplicaSet or Job) and say whether the agent would accept its "
        "affinity annotations (cri-resource-manager's, numa-agent.io/affinity and "
        "numa-agent.io/topology-spread-constraints) and numa-agent.io/cpu-class and "
        "memory-tiers, with the agent's own error messages, and "
        "warn where the pod spec's own affinity or topologySpreadConstraints names a "
        "numa-agent.io key, which the cluster scheduler does not know. --simulate also places the "
        "pod (every replica) on an empty copy of this machine (or of --sysfs-root) with the "
        "configured policy. Exit 0: accepted; 1: an annotation (or, with --simulate, a "
        "placement) would be refused; 2: the manifest or configuration cannot be read.",
    )
    parser.add_argument("manifest", metavar="POD.yaml", help="the manifest to check")
    parser.add_argument(
        "--simulate", action="store_true", help="also show where the containers would land"
    )
    add_config_flags(parser)
    parser.set_defaults(func=_check)
