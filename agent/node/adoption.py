"""Taking in a running container the agent does not know, where it runs.

At start (a container the state file does not name) and on a relist (a
container created behind the agent's back, or by a create whose answer never
came): its place is inferred from the cpusets the runtime reports, so its CPUs
are taken before anyone else can be given them.
"""

from __future__ import annotations

import logging
from dataclasses import replace

from agent.kubelet import (
    POD_NAME_LABEL,
    POD_NAMESPACE_LABEL,
    POD_UID_LABEL,
    qos_from_cgroup_parent,
)
from agent.node.books import Books
from agent.node.describe import container_info, container_pod, resources_of
from agent.node.requests import running_request
from agent.policy.policy import Decision, PlacementError
from agent.policy.request import ContainerRequest
from agent.workload import ContainerInfo, PodInfo, QoSClass
from proto import cri_pb2
from topology.cpuset import CPUSet, CPUSetError

log = logging.getLogger(__name__)


def applied(books: Books, cid: str, status: cri_pb2.ContainerStatus) -> None:
    """The runtime reports these cpusets (and this state) for the container."""
    reported = status.resources.linux
    books.updater.set_applied(cid, reported.cpuset_cpus, reported.cpuset_mems)
    if status.state == cri_pb2.CONTAINER_RUNNING:
        books.started.add(cid)


def adoptee(
    books: Books,
    ctr: cri_pb2.Container,
    status: cri_pb2.ContainerStatus,
    pod_class: QoSClass | None = None,
    cgroup_parent: str = "",
) -> tuple[ContainerRequest, cri_pb2.ContainerStatus]:
    """The request of a listed container: its QoS from its pod's cgroup parent when it
    is known, else `pod_class` (estimated over the whole pod), else from its own
    resources (a container whose pod the runtime does not list). `cgroup_parent`
    is the pod's as the runtime reports it, for a pod the agent does not know."""
    res = resources_of(status.resources.linux)
    pod = books.pods.get(ctr.pod_sandbox_id) or PodInfo(
        uid=ctr.labels.get(POD_UID_LABEL, ""),
        name=ctr.labels.get(POD_NAME_LABEL, ""),
        namespace=ctr.labels.get(POD_NAMESPACE_LABEL, ""),
        qosclass=qos_from_cgroup_parent(cgroup_parent) or QoSClass.BESTEFFORT,
        id=ctr.pod_sandbox_id,
        cgroup_parent=cgroup_parent,
    )
    if qos_from_cgroup_parent(pod.cgroup_parent) is None and pod_class is not None:
        pod = replace(pod, qosclass=pod_class)
    else:
        pod = container_pod(pod, res)
    info: ContainerInfo = replace(
        container_info(ctr.metadata.name, pod, ctr.labels, ctr.annotations), id=ctr.id
    )
    return running_request(ctr.id, info, res), status


def _cpuset(text: str, what: str) -> CPUSet:
    try:
        return CPUSet.parse(text)
    except CPUSetError as err:
        log.warning("%s: unreadable cpuset %r (%s); treating it as unset", what, text, err)
        return CPUSet()


def adopt(
    books: Books,
    request: ContainerRequest,
    linux: cri_pb2.LinuxContainerResources,
    *,
    retry_s: float | None = None,
) -> Decision | None:
    """Take a container the agent does not know in where it runs (None: cannot).
    `retry_s`: when the caller tries again if this fails (said in the error)."""
    what = f"container {request.key}"
    cpus, mems = _cpuset(linux.cpuset_cpus, what), _cpuset(linux.cpuset_mems, what)
    try:
        decision = books.policy.adopt(request, cpus, mems)
    except PlacementError as err:
        then = "" if retry_s is None else f"; trying again in {retry_s:.0f} s"
        log.error("cannot adopt %s (%s): %s%s", request.key, request.container.who, err, then)
        return None
    books.apply(decision.updates)
    log.info(
        "adopted unknown %s (%s): cpus %s mems %s",
        request.key,
        request.container.who,
        decision.cpus,
        decision.mems,
    )
    return decision
