"""CreateContainer: place the container, write its cpusets into the request, and
track the container the runtime made, even when the runtime's answer never came.

A create whose answer is lost (the caller's deadline passed, the connection
broke) may still make a container with the CPUs the agent wrote: its placement
stays reserved under the create's temporary key (books.Unresolved) until the
container is seen, then it is tracked; or until complete listings lack it for
CREATE_GRACE_S, then its CPUs are free again.
"""

from __future__ import annotations

import contextlib
import logging
import time
from dataclasses import replace

import grpc

from agent.affinity import AnnotationError
from agent.node.books import Books, Unresolved, write_cpusets
from agent.node.crashpoints import crash_point
from agent.node.decisions import Decider
from agent.node.describe import container_info, container_pod, pod_from_config, resources_of
from agent.node.keeper import BookKeeper
from agent.node.methods import decode
from agent.node.requests import container_rules, pod_rules, request_for
from agent.node.runtime_access import RuntimeAccess
from agent.policy.policy import Decision
from agent.relay.backend import BackendError
from agent.relay.hooks import Forward, HookAbort
from agent.rules import RuleError
from agent.workload import ContainerInfo
from proto import cri_pb2

log = logging.getLogger(__name__)

# Codes with which a forwarded call can end while the runtime goes on with it: for
# a create, the container may yet appear (books.Unresolved). UNAVAILABLE is not one:
# the runtime could not be reached, or went away and took the create with it (a
# container it left behind anyway is adopted on the next relist).
UNKNOWN_OUTCOME = frozenset({grpc.StatusCode.DEADLINE_EXCEEDED, grpc.StatusCode.CANCELLED})
# How long a create that gave no answer keeps its CPUs when complete listings do
# not show its container (the runtime answers, but has not made it).
CREATE_GRACE_S = 60.0


def create_key(sandbox_id: str, name: str, attempt: int | str) -> str:
    """The temporary key of a placement whose container has no id yet."""
    return f"{sandbox_id}/{name}/{attempt}"


class Creates:
    def __init__(self, keeper: BookKeeper, decider: Decider, runtime: RuntimeAccess) -> None:
        self._keeper = keeper
        self._decider = decider
        self._runtime = runtime

    def create_container(self, request: bytes, forward: Forward) -> bytes:
        keeper = self._keeper
        req = decode(cri_pb2.CreateContainerRequest, request)
        config = req.config
        name = config.metadata.name
        sandbox_id = req.pod_sandbox_id
        res = resources_of(config.linux.resources)
        known = keeper.read(lambda b: b.pods.get(sandbox_id))
        pod = known or pod_from_config(sandbox_id, req.sandbox_config)
        info = container_info(name, container_pod(pod, res), config.labels, config.annotations)
        try:
            rules = container_rules(info)
            prules = pod_rules(info)
        except (AnnotationError, RuleError) as err:
            raise self._decider.refusal(grpc.StatusCode.INVALID_ARGUMENT, info, err) from err
        keeper.must_record(f"the placement of {info.who}")
        key = create_key(sandbox_id, name, config.metadata.attempt)
        creq = request_for(key, info, res, rules, prules)
        unresolved = keeper.read(lambda b: b.unresolved.get(key))
        if unresolved is not None and self.resolve(key, unresolved):
            # The create that gave no answer did create it: this one is a new placement.
            unresolved = None

        def place(books: Books) -> tuple[Decision, bool]:
            current = books.record(key)
            if current is not None and key not in books.unresolved:
                # kubelet retried while its first call is still in flight: placing
                # again would resize that one's allocation and both would share it.
                raise HookAbort(
                    grpc.StatusCode.ABORTED,
                    f"a CreateContainer for {info.who} (attempt {config.metadata.attempt}) "
                    "is already in flight; retry once it has finished",
                )
            if current is not None:
                # Retrying a create that gave no answer: the runtime may still create
                # the first one, with these CPUs, so the retry gets the same ones.
                decision = books.policy.current(key)
                assert decision is not None
                return decision, True
            decision = self._decider.decide(info, lambda: books.policy.place(creq))
            books.pods.setdefault(sandbox_id, pod)
            books.apply(decision.updates)
            if decision.replaced:  # a re-create took the exited container's place
                books.release([decision.replaced])
            return decision, False

        # The others' new cpusets are sent once the container exists (below).
        decision, retrying = keeper.change(place, flush=False)
        crash_point("create-after-decision")
        linux = req.config.linux.resources  # created on first write if kubelet sent none
        write_cpusets(linux, decision.cpus, decision.mems)
        try:
            reply = forward(req.SerializeToString())
        except BackendError as err:
            if retrying:
                pass  # the first create may still make it: the reservation stays as it was
            elif err.code in UNKNOWN_OUTCOME:
                self._give_up(key, info, linux, err)
            else:
                keeper.change(lambda b: b.release([key]))  # the runtime answered: none made
            raise
        crash_point("create-after-runtime")
        cid = cri_pb2.CreateContainerResponse.FromString(reply).container_id

        def track(books: Books) -> ContainerInfo | None:
            if books.record(key) is None:
                return None  # its sandbox was stopped while the create was in flight
            books.adopt_created(key, cid, linux)
            record = books.record(cid)
            assert record is not None
            return record.request.container

        placed = keeper.change_recorded(track, f"container {cid} ({info.who})")
        if placed is None:
            log.info("%s (%s) created after its pod was stopped", cid, info.who)
            return reply
        crash_point("create-after-save")
        self._decider.report(placed, replace(decision, key=cid), "placed")
        return reply

    def _give_up(
        self,
        key: str,
        info: ContainerInfo,
        linux: cri_pb2.LinuxContainerResources,
        err: BackendError,
    ) -> None:
        """No answer came: keep the placement reserved (see books.Unresolved), and
        look once whether the runtime has the container already."""
        copy = cri_pb2.LinuxContainerResources()
        copy.CopyFrom(linux)
        unresolved = Unresolved(time.monotonic(), copy)

        def reserve(books: Books) -> bool:
            if books.record(key) is None:
                return False  # its sandbox went meanwhile
            books.unresolved[key] = unresolved
            return True

        if not self._keeper.note(reserve):
            return
        log.warning(
            "CreateContainer for %s gave no answer (%s); its CPUs %s stay reserved until the "
            "runtime is seen to have created it or not",
            info.who,
            err.code.name,
            linux.cpuset_cpus or "-",
        )
        with contextlib.suppress(BackendError):
            self.resolve(key, unresolved)

    def resolve(self, key: str, unresolved: Unresolved) -> bool:
        """Ask the runtime whether the create under `key` made a container; if so,
        track it (True). Raises BackendError if the runtime cannot be asked."""
        sandbox_id, name, attempt = key.rsplit("/", 2)
        for ctr in self._runtime.list_containers(sandbox_id):
            if (
                ctr.pod_sandbox_id == sandbox_id
                and ctr.metadata.name == name
                and str(ctr.metadata.attempt) == attempt
            ):
                self.track_unresolved(key, ctr.id, unresolved)
                return True
        return False

    def track_unresolved(self, key: str, cid: str, unresolved: Unresolved) -> None:
        """The create under `key` that gave no answer made container `cid`."""

        def track(books: Books) -> bool:
            if books.unresolved.get(key) is not unresolved or cid in books.sent:
                return False
            books.adopt_created(key, cid, unresolved.linux)
            return True

        if self._keeper.change(track):
            log.info("%s: the create that gave no answer made container %s; tracking it", key, cid)
