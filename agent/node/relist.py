"""kubelet's relists, read for what they say about the agent's books: containers
seen exited give their CPUs back, live ones the agent does not track are taken in
(a create that gave no answer made it, or it was created behind the agent's back)."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from agent.node.adoption import adopt, adoptee, applied
from agent.node.backoff import Backoff
from agent.node.books import Books, Unresolved
from agent.node.create import CREATE_GRACE_S, Creates, create_key
from agent.node.describe import LIVE_STATES
from agent.node.keeper import BookKeeper
from agent.node.methods import decode
from agent.node.runtime_access import RuntimeAccess
from agent.relay.backend import BackendError
from agent.relay.hooks import Forward
from proto import cri_pb2

log = logging.getLogger(__name__)


class Relists:
    def __init__(
        self, keeper: BookKeeper, creates: Creates, runtime: RuntimeAccess, retries: Backoff
    ) -> None:
        self._keeper = keeper
        self._creates = creates
        self._runtime = runtime
        self._retries = retries  # containers a relist could not adopt

    def list_containers(self, request: bytes, forward: Forward) -> bytes:
        req = decode(cri_pb2.ListContainersRequest, request)
        reply = forward(request)
        containers = cri_pb2.ListContainersResponse.FromString(reply).containers
        self._release_exited([c.id for c in containers if c.state == cri_pb2.CONTAINER_EXITED])

        def strangers_of(books: Books) -> tuple[list[cri_pb2.Container], bool]:
            live = [c for c in containers if c.state in LIVE_STATES and c.id not in books.sent]
            return live, bool(books.unresolved)

        strangers, unresolved = self._keeper.read(strangers_of)
        if strangers or unresolved or self._retries:
            self._take_in(strangers, complete=not req.HasField("filter"))
        return reply

    def container_status(self, request: bytes, forward: Forward) -> bytes:
        decode(cri_pb2.ContainerStatusRequest, request)
        reply = forward(request)
        status = cri_pb2.ContainerStatusResponse.FromString(reply).status
        if status.state == cri_pb2.CONTAINER_EXITED:
            self._release_exited([status.id])
        return reply

    def _release_exited(self, container_ids: list[str]) -> None:
        if not container_ids:
            return
        exited = self._keeper.read(
            lambda b: [cid for cid in container_ids if cid in b.sent and not b.policy.held(cid)]
        )
        if exited:
            log.info("containers exited, their places kept for a re-create: %s", ", ".join(exited))
            self._keeper.change(lambda b: b.exited(exited))

    def _take_in(self, strangers: list[cri_pb2.Container], *, complete: bool) -> None:
        """Live containers the agent does not track: one a create that gave no answer
        made is tracked under that placement; one created behind the agent's back is
        adopted where it runs, before its CPUs can go to anyone else. A create that
        gave no answer and whose container a complete listing still lacks after
        CREATE_GRACE_S is given up: its CPUs are free again."""
        seen: set[str] = set()
        for ctr in strangers:
            key = create_key(ctr.pod_sandbox_id, ctr.metadata.name, ctr.metadata.attempt)
            seen.add(key)
            unresolved, in_flight = self._keeper.read(_create_of(key))
            if unresolved is not None:
                self._creates.track_unresolved(key, ctr.id, unresolved)
            elif not in_flight:  # a create in flight is tracked when it returns
                self._adopt_stranger(ctr)
        if not complete:
            return
        self._retries.keep_only(c.id for c in strangers)
        now = time.monotonic()
        stale = self._keeper.read(
            lambda b: [
                key
                for key, u in b.unresolved.items()
                if key not in seen and now - u.since > CREATE_GRACE_S
            ]
        )
        if stale:
            log.warning(
                "creates that gave no answer made no container in %.0fs; freeing their CPUs: %s",
                CREATE_GRACE_S,
                ", ".join(stale),
            )
            self._keeper.change(lambda b: b.release(stale))

    def _adopt_stranger(self, ctr: cri_pb2.Container) -> None:
        if not self._retries.due(ctr.id):
            return
        sandbox_id = ctr.pod_sandbox_id
        parent = ""
        try:
            status = self._runtime.container_status(ctr.id)
            if not self._keeper.read(lambda b: sandbox_id in b.pods):
                # A pod the agent never saw start: its class from its cgroup parent.
                parent = self._runtime.pod_cgroup_parent(sandbox_id)
        except BackendError as err:
            retry_s = self._retries.failed(ctr.id)
            log.debug("cannot adopt %s yet: %s; trying again in %.0f s", ctr.id, err, retry_s)
            return

        def take(books: Books) -> None:
            if ctr.id in books.sent:
                return
            request, _ = adoptee(books, ctr, status, cgroup_parent=parent)
            linux = status.resources.linux
            retry_s = self._retries.next_delay(ctr.id)
            if adopt(books, request, linux, retry_s=retry_s) is None:
                self._retries.failed(ctr.id)
                return
            self._retries.succeeded(ctr.id)
            books.created(ctr.id, linux)
            applied(books, ctr.id, status)
            books.want(ctr.id)

        self._keeper.change(take)


def _create_of(key: str) -> Callable[[Books], tuple[Unresolved | None, bool]]:
    """A look at the books: the unresolved create under `key`, and whether a create
    under it is in flight (placed, no answer yet)."""

    def look(books: Books) -> tuple[Unresolved | None, bool]:
        unresolved = books.unresolved.get(key)
        return unresolved, unresolved is None and books.record(key) is not None

    return look
