"""A created container's life: started, stopped or removed, and its resources
updated by kubelet (a resize is placed again, the agent's cpusets are kept)."""

from __future__ import annotations

import logging

import grpc

from agent.node.books import Books, write_cpusets
from agent.node.crashpoints import crash_point
from agent.node.decisions import Decider
from agent.node.describe import merge_update, resources_of
from agent.node.keeper import BookKeeper
from agent.node.methods import decode
from agent.node.requests import running_request
from agent.node.runtime_access import RuntimeAccess
from agent.policy.policy import Decision
from agent.policy.record import PlacementRecord
from agent.policy.request import Resources
from agent.relay.backend import BackendError
from agent.relay.hooks import Forward
from proto import cri_pb2

log = logging.getLogger(__name__)


class Containers:
    def __init__(self, keeper: BookKeeper, decider: Decider, runtime: RuntimeAccess) -> None:
        self._keeper = keeper
        self._decider = decider
        self._runtime = runtime

    def resend(self, container_id: str) -> bool:
        """Send the container's wanted resources again, even if the runtime was told
        them already (it may not have applied them); False if it is not tracked."""

        def again(books: Books) -> bool:
            if container_id not in books.sent:
                return False
            books.updater.force(container_id)
            books.want(container_id)
            return True

        with self._keeper.lock:
            tracked = again(self._keeper.books)
        self._keeper.flush()
        return tracked

    def start_container(self, request: bytes, forward: Forward) -> bytes:
        """containerd 1.6 applies an update that arrives while a container starts to
        its spec only: the task starts with the old cpuset, and ContainerStatus
        reports the new one. So an update in flight at any moment of the start is
        sent again once the start is over (when the task exists)."""
        container_id = decode(cri_pb2.StartContainerRequest, request).container_id
        if not self._keeper.read(lambda b: container_id in b.sent):
            return forward(request)
        updater = self._keeper.updater
        updater.starting(container_id)
        try:
            reply = forward(request)
        finally:
            overlapped = updater.started(container_id)

        def ran(books: Books) -> None:
            if container_id in books.sent:
                books.started.add(container_id)

        self._keeper.note(ran)
        if overlapped:
            log.info("%s: its cpuset changed while it started; sending it again", container_id)
            self.resend(container_id)
        return reply

    def stop_container(self, request: bytes, forward: Forward) -> bytes:
        """A stopped container has exited: its place is kept for a re-create until its
        sandbox stops (the policy's `exited`), and nothing more is owed to it. One that
        never started is still live: containerd 1.6 answers StopContainer of a created
        container OK and still starts it later, so it is tracked as it was until it
        is removed or seen exited."""
        container_id = decode(cri_pb2.StopContainerRequest, request).container_id
        reply = forward(request)
        tracked, ran = self._keeper.read(
            lambda b: (container_id in b.sent, container_id in b.started)
        )
        if not tracked:
            return reply
        if not ran and self._could_still_start(container_id):
            log.info(
                "%s was stopped before it ever started; the runtime can still start it, so "
                "its CPUs stay held until it is removed",
                container_id,
            )
            return reply
        self._keeper.change(lambda b: b.exited([container_id]))
        return reply

    def _could_still_start(self, container_id: str) -> bool:
        try:
            state = self._runtime.container_status(container_id).state
        except BackendError as err:
            # Gone: nothing can start. Cannot ask: hold (a relist or the remove frees it).
            return bool(err.code != grpc.StatusCode.NOT_FOUND)
        return bool(state == cri_pb2.CONTAINER_CREATED)

    def remove_container(self, request: bytes, forward: Forward) -> bytes:
        container_id = decode(cri_pb2.RemoveContainerRequest, request).container_id
        reply = forward(request)
        crash_point("remove-after-runtime")
        # The place stays for a re-create until the sandbox stops (policy.exited).
        self._keeper.change(lambda b: b.removed([container_id]))
        return reply

    def update_container_resources(self, request: bytes, forward: Forward) -> bytes:
        req = decode(cri_pb2.UpdateContainerResourcesRequest, request)
        cid = req.container_id
        tracked = self._keeper.read(lambda b: cid in b.sent)
        if not tracked or not req.HasField("linux"):
            return forward(request)  # not the agent's (if it became so meanwhile: see below)
        self._keeper.must_record(f"the resources of container {cid}")
        # One writer per container, in order: kubelet's update waits for an update of
        # the agent's in flight, none starts meanwhile, and what is owed afterwards is
        # built from the resources this one leaves.
        try:
            with self._keeper.updater.writing(cid):
                return self._update_in_order(req, cid, request, forward)
        finally:
            self._keeper.flush()  # what is owed now, once the writer's turn is over

    def _update_in_order(
        self,
        req: cri_pb2.UpdateContainerResourcesRequest,
        cid: str,
        request: bytes,
        forward: Forward,
    ) -> bytes:
        def merge(
            books: Books,
        ) -> tuple[PlacementRecord | None, cri_pb2.LinuxContainerResources | None, Decision | None]:
            record = books.record(cid) if cid in books.sent else None
            if record is None:
                return None, None, None
            # Fields left unset mean "unchanged" (a partial update, as crictl sends),
            # not "zero": the runtime keeps them, and so does the agent.
            new = merge_update(books.sent[cid], req.linux)
            new_res = resources_of(new)
            decision = None
            if _cpu_changed(record.request.resources, new_res):
                info = record.request.container
                creq = running_request(cid, info, new_res)
                decision = self._decider.decide(info, lambda: books.policy.resize(creq))
                books.apply(decision.updates)
                record = books.record(cid)
                assert record is not None
            write_cpusets(new, record.cpus, record.mems)
            return record, new, decision

        # Persisted before it is forwarded: a resize's new record is on disk first.
        record, new, decision = self._keeper.change(merge, flush=False)
        if record is None or new is None:
            return forward(request)
        req.linux.CopyFrom(new)
        try:
            reply = forward(req.SerializeToString())
        except BackendError:

            def owed(books: Books) -> None:
                if cid in books.sent:
                    # A resize may have moved it, and the failed call may yet have been
                    # applied: the runtime's cpuset is unknown, the wanted one is owed.
                    books.updater.unknown(cid)
                    books.want(cid)

            self._keeper.change(owed, flush=False)
            raise

        def applied(books: Books) -> None:
            if cid in books.sent:
                books.created(cid, new)
                books.updater.set_applied(cid, new.cpuset_cpus, new.cpuset_mems)
                books.want(cid)

        self._keeper.change_recorded(applied, f"the new resources of container {cid}")
        if decision is not None:
            self._decider.report(record.request.container, decision, "resized")
        return reply


def _cpu_changed(old: Resources, new: Resources) -> bool:
    return (old.cpu_shares, old.cpu_quota, old.cpu_period) != (
        new.cpu_shares,
        new.cpu_quota,
        new.cpu_period,
    )
