"""Start a one-container pod through a NodeAgent's handlers, as kubelet would."""

from __future__ import annotations

import uuid

from agent.criclient import kubelet_container_config, kubelet_pod_config
from agent.node.agent import NodeAgent
from agent.runtime.inprocess import in_process_forward
from agent.runtime.memory import MemoryRuntime
from agent.workload import QoSClass
from proto import cri_pb2

SERVICE = "/runtime.v1.RuntimeService/"


def start_pod(
    agent: NodeAgent, runtime: MemoryRuntime, name: str, qos: QoSClass, milli: int
) -> str:
    handlers = agent.handlers()

    def call(method: str, request: bytes) -> bytes:
        forward = in_process_forward(runtime, SERVICE + method)
        handler = handlers.get(SERVICE + method)
        return handler(request, forward) if handler else forward(request)

    pod = kubelet_pod_config(name, "default", str(uuid.uuid4()), qos=qos)
    sid = cri_pb2.RunPodSandboxResponse.FromString(
        call("RunPodSandbox", cri_pb2.RunPodSandboxRequest(config=pod).SerializeToString())
    ).pod_sandbox_id
    limit = milli if qos is QoSClass.GUARANTEED else 0
    memory = 1 << 30 if qos is QoSClass.GUARANTEED else 0
    config = kubelet_container_config(pod, "main", milli, limit, memory)
    request = cri_pb2.CreateContainerRequest(pod_sandbox_id=sid, config=config, sandbox_config=pod)
    cid = cri_pb2.CreateContainerResponse.FromString(
        call("CreateContainer", request.SerializeToString())
    ).container_id
    call("StartContainer", cri_pb2.StartContainerRequest(container_id=cid).SerializeToString())
    return cid
