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
from dataclasses import dataclass

import grpc

from agent.node.adoption import adopt, adoptee, applied
from agent.node.books import Books
from agent.node.describe import LIVE_STATES, pod_from_sandbox
from agent.node.requests import running_request
from agent.node.runtime_access import RuntimeAccess
from agent.policy.policy import Decision, PlacementError
from agent.policy.request import ContainerRequest, CpuKind, classify
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


@dataclass(frozen=True, slots=True)
class Outcome:
    restored: int  # known to the state file, back where they were
    replaced: int  # known, but their saved place is no longer valid
    adopted: int  # not known: taken in where the runtime runs them


def list_runtime(runtime: RuntimeAccess) -> Listing:
    """Ask the runtime (no lock held); a container gone between list and status is skipped."""
    sandboxes = tuple(runtime.list_pod_sandboxes())
    containers = []
    for ctr in runtime.list_containers():
        if ctr.state not in LIVE_STATES and ctr.state != cri_pb2.CONTAINER_EXITED:
            continue
        try:
            containers.append((ctr, runtime.container_status(ctr.id)))
        except BackendError as err:
            if err.code != grpc.StatusCode.NOT_FOUND:
                raise
    return Listing(sandboxes, tuple(containers))


def rebuild(books: Books, saved: SavedState, listing: Listing) -> Outcome:
    """Make the books what the state file says, for what still runs (decision lock held)."""
    books.reset()
    for sandbox in listing.sandboxes:
        books.pods[sandbox.id] = saved.pods.get(sandbox.id) or pod_from_sandbox(sandbox)
    known: list[tuple[SavedContainer, cri_pb2.ContainerStatus]] = []
    unknown: list[tuple[cri_pb2.Container, cri_pb2.ContainerStatus]] = []
    for ctr, status in listing.containers:
        entry = saved.containers.get(ctr.id)
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
    adoptees = [adoptee(books, ctr, status) for ctr, status in unknown]
    adoptees.sort(
        key=lambda a: (
            classify(a[0], books.config).kind is not CpuKind.EXCLUSIVE,
            a[0].container.qosclass is not QoSClass.GUARANTEED,
        )
    )
    adopted = 0
    for request, status in adoptees:
        linux = status.resources.linux
        decision = adopt(books, request, linux)
        if decision is None:
            continue
        books.created(request.key, linux)
        applied(books, request.key, status)
        adopted += 1
        if classify(request, books.config).kind is CpuKind.EXCLUSIVE and not decision.exclusive:
            # It wants CPUs of its own but cannot keep the ones it runs on.
            again.append((request, status))
    # Placed again only once every valid claim is in, so they cannot take CPUs
    # another container still holds (known ones keep nothing meanwhile; adopted ones
    # run shared until then).
    for request, status in again:
        _place_again(books, request, status.resources.linux)
    for cid in books.sent:
        books.want(cid)
    return Outcome(len(known) - len(again), len(again), adopted)


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
