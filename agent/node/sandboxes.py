"""Pod sandboxes: remembered when they run, their containers released when they stop.

By sandbox id, not pod UID: a pod's old sandbox may be stopped or removed while
the containers of its new sandbox (same UID) run. Creates still in flight count.
"""

from __future__ import annotations

from agent.node.books import Books
from agent.node.describe import pod_from_config
from agent.node.keeper import BookKeeper
from agent.node.methods import decode
from agent.relay.hooks import Forward
from proto import cri_pb2


class Pods:
    def __init__(self, keeper: BookKeeper) -> None:
        self._keeper = keeper

    def run_pod_sandbox(self, request: bytes, forward: Forward) -> bytes:
        config = decode(cri_pb2.RunPodSandboxRequest, request).config
        what = f"pod {config.metadata.namespace}/{config.metadata.name}"
        self._keeper.must_record(what)
        reply = forward(request)
        sandbox_id = cri_pb2.RunPodSandboxResponse.FromString(reply).pod_sandbox_id
        pod = pod_from_config(sandbox_id, config)

        def remember(books: Books) -> None:
            books.pods[sandbox_id] = pod

        self._keeper.change_recorded(remember, f"{what} (sandbox {sandbox_id})")
        return reply

    def stop_pod_sandbox(self, request: bytes, forward: Forward) -> bytes:
        sandbox_id = decode(cri_pb2.StopPodSandboxRequest, request).pod_sandbox_id
        reply = forward(request)
        self._release(sandbox_id, forget_pod=False)
        return reply

    def remove_pod_sandbox(self, request: bytes, forward: Forward) -> bytes:
        sandbox_id = decode(cri_pb2.RemovePodSandboxRequest, request).pod_sandbox_id
        reply = forward(request)
        self._release(sandbox_id, forget_pod=True)
        return reply

    def _release(self, sandbox_id: str, *, forget_pod: bool) -> None:
        def release(books: Books) -> None:
            records = books.policy.records()
            books.release(
                [k for k, r in records.items() if r.request.container.pod.id == sandbox_id]
            )
            if forget_pod:
                books.pods.pop(sandbox_id, None)

        self._keeper.change(release)
