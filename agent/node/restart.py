"""Taking the books back at start: the state file's records, checked against what the runtime runs.

One path: every live container the state file knows is restored with its saved
pool, CPUs, score and explanation whenever they are still valid (so a restart
changes nothing); only when they are not is it placed again. Containers the file
does not know (started while the agent was down, or no file at all) are adopted
from the cpusets the runtime reports. Containers gone from the runtime are
forgotten.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field

import grpc

from agent.node.adoption import adopt, adoptee, applied
from agent.node.books import Books
from agent.node.describe import LIVE_STATES, pod_from_sandbox, qos_of_pod, resources_of
from agent.node.requests import running_request
from agent.node.runtime_access import RuntimeAccess
from agent.policy.policy import Decision, PlacementError
from agent.policy.request import ContainerRequest, CpuKind, Resources, classify
from agent.relay.backend import BackendError
from agent.state.schema import SavedContainer, SavedState
from agent.workload import QoSClass
from proto import cri_pb2

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Listing:
    """What the runtime runs: its sandboxes, and each live container with its status."""

    sandboxes: tuple[cri_pb2.PodSandbox, ...]
    containers: tuple[tuple[cri_pb2.Container, cri_pb2.ContainerStatus], ...]
    parents: Mapping[str, str] = field(default_factory=dict)  # sandbox id -> cgroup parent


@dataclass(frozen=True, slots=True)
class Outcome:
    """How the containers the books track after a start came back; the four parts
    add up to every tracked container (logs and status show these same numbers)."""

    restored: int  # known to the state file, back where they were
    replaced: int  # known, but their saved place is no longer valid: placed again
    adopted: int  # not known: taken in where the runtime runs them
    moved: int = 0  # adopted, wanting CPUs of their own they could not keep: placed again

    @property
    def total(self) -> int:
        return self.restored + self.replaced + self.adopted + self.moved

    def counts(self) -> dict[str, int]:
        """For the status document."""
        return {
            "restored": self.restored,
            "placed_again": self.replaced,
            "adopted": self.adopted,
            "adopted_and_moved": self.moved,
        }


def list_runtime(runtime: RuntimeAccess) -> Listing:
    """Ask the runtime (no lock held); a container gone between list and status is
    skipped. Each pod's cgroup parent (its QoS class) comes from PodSandboxStatus."""
    sandboxes = tuple(runtime.list_pod_sandboxes())
    parents: dict[str, str] = {}
    for sandbox in sandboxes:
        try:
            parents[sandbox.id] = runtime.pod_cgroup_parent(sandbox.id)
        except BackendError as err:
            if err.code != grpc.StatusCode.NOT_FOUND:
                log.warning("cannot read the cgroup parent of pod sandbox %s: %s", sandbox.id, err)
    containers = []
    for ctr in _all_containers(runtime, sandboxes):
        # Exited ones too: their places are kept for a re-create (policy.exited).
        if ctr.state not in LIVE_STATES and ctr.state != cri_pb2.CONTAINER_EXITED:
            continue
        try:
            containers.append((ctr, runtime.container_status(ctr.id)))
        except BackendError as err:
            if err.code != grpc.StatusCode.NOT_FOUND:
                raise
    return Listing(sandboxes, tuple(containers), parents)


def _all_containers(
    runtime: RuntimeAccess, sandboxes: tuple[cri_pb2.PodSandbox, ...]
) -> list[cri_pb2.Container]:
    """Every container the runtime has. A runtime's reply is capped (containerd sends
    at most 16 MiB by default) and containers with large annotations pass it: then
    they are listed pod by pod, each a reply of its own."""
    try:
        return runtime.list_containers()
    except BackendError as err:
        if err.code != grpc.StatusCode.RESOURCE_EXHAUSTED:
            raise
        log.warning(
            "the runtime's list of all containers is too large (%s); listing them pod by pod",
            err.details,
        )
    containers: list[cri_pb2.Container] = []
    for sandbox in sandboxes:
        containers.extend(runtime.list_containers(sandbox.id))
    return containers


def rebuild(books: Books, saved: SavedState, listing: Listing) -> Outcome:
    """Make the books what the state file says, for what still runs (decision lock held)."""
    books.reset()
    for sandbox in listing.sandboxes:
        books.pods[sandbox.id] = saved.pods.get(sandbox.id) or pod_from_sandbox(
            sandbox, listing.parents.get(sandbox.id, "")
        )
    # A pod's places last until its sandbox stops: an exited container of a stopped
    # sandbox (the agent died between StopPodSandbox and its record) keeps nothing.
    ready = {s.id for s in listing.sandboxes if s.state == cri_pb2.SANDBOX_READY}
    known: list[tuple[SavedContainer, cri_pb2.ContainerStatus]] = []
    unknown: list[tuple[cri_pb2.Container, cri_pb2.ContainerStatus]] = []
    for ctr, status in listing.containers:
        entry = saved.containers.get(ctr.id)
        if ctr.state == cri_pb2.CONTAINER_EXITED and ctr.pod_sandbox_id not in ready:
            continue
        if entry is not None:
            known.append((entry, status))
        elif ctr.state != cri_pb2.CONTAINER_EXITED:
            unknown.append((ctr, status))
    # Exclusive containers first, so their CPUs go back to them before anyone is re-placed.
    known.sort(key=lambda e: not e[0].placement.exclusive)
    again: list[tuple[ContainerRequest, cri_pb2.ContainerStatus]] = []
    for entry, status in known:
        request = running_request(entry.info.id, entry.info, entry.resources)
        sandbox_id = entry.info.pod.id
        if sandbox_id not in books.pods and sandbox_id in saved.pods:
            books.pods[sandbox_id] = saved.pods[sandbox_id]
        decision = books.policy.restore(request, entry.placement)
        if status.state == cri_pb2.CONTAINER_EXITED:
            # Exited, its place kept for a re-create (policy.exited): back the same.
            if decision is not None:
                books.created(entry.info.id, entry.sent)
                books.apply(decision.updates)
                books.exited([entry.info.id])
            continue
        books.created(entry.info.id, entry.sent)
        applied(books, entry.info.id, status)
        if decision is None:
            again.append((request, status))
        else:
            books.apply(decision.updates)
    # A pod whose class no cgroup parent says is classed over all its containers.
    by_pod: dict[str, list[Resources]] = {}
    for ctr, status in unknown:
        by_pod.setdefault(ctr.pod_sandbox_id, []).append(resources_of(status.resources.linux))
    classes = {sid: qos_of_pod(res) for sid, res in by_pod.items()}
    adoptees = [
        adoptee(books, ctr, status, classes.get(ctr.pod_sandbox_id)) for ctr, status in unknown
    ]
    adoptees.sort(
        key=lambda a: (
            classify(a[0], books.config).kind is not CpuKind.EXCLUSIVE,
            a[0].container.qosclass is not QoSClass.GUARANTEED,
        )
    )
    known_again = {request.key for request, _ in again}
    adopted: set[str] = set()
    moved: set[str] = set()
    for request, status in adoptees:
        linux = status.resources.linux
        decision = adopt(books, request, linux)
        if decision is None:
            continue
        books.created(request.key, linux)
        applied(books, request.key, status)
        adopted.add(request.key)
        if classify(request, books.config).kind is CpuKind.EXCLUSIVE and not decision.exclusive:
            # It wants CPUs of its own but cannot keep the ones it runs on.
            again.append((request, status))
            moved.add(request.key)
    # Placed again only once every valid claim is in, so they cannot take CPUs
    # another container still holds (known ones keep nothing meanwhile; adopted ones
    # run shared until then).
    for request, status in again:
        _place_again(books, request, status.resources.linux)
    for cid in books.sent:
        books.want(cid)
    tracked = set(books.sent)
    restored = {e.info.id for e, _ in known} - known_again
    return Outcome(
        restored=len(restored & tracked),
        replaced=len(known_again & tracked),
        adopted=len((adopted - moved) & tracked),
        moved=len(moved & tracked),
    )


def _place_again(
    books: Books, request: ContainerRequest, linux: cri_pb2.LinuxContainerResources
) -> None:
    """A container that cannot keep its place (CPUs offline, newly reserved or taken,
    pool gone, configuration changed): placed again; if nothing fits it stays where
    it runs (adopted there if it is not yet), so that it is still tracked."""
    info = request.container
    try:
        decision: Decision = books.policy.place(request)
    except PlacementError as err:
        log.warning(
            "%s (%s) cannot keep its place and nothing else fits (%s); it stays on cpus %s",
            request.key,
            info.who,
            err,
            linux.cpuset_cpus or "-",
        )
        if request.key not in books.policy.records() and adopt(books, request, linux) is None:
            books.release([request.key])
        return
    log.warning(
        "%s (%s) cannot keep its saved place (CPUs offline, reserved or taken, or the "
        "configuration changed): placed again in %s on cpus %s",
        request.key,
        info.who,
        decision.pool,
        decision.cpus,
    )
    books.apply(decision.updates)
