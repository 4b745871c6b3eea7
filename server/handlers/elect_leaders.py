"""ElectLeaders (key 43), v0-2: preferred (and from v1 unclean) leader election. In a ZooKeeper
cluster, served by its controller (Kafka 3.9's KafkaApis.handleElectLeaders and
KafkaController.onReplicaElection, in coordinator/controller/); the admin client sends it to the
controller. ALTER on the cluster (CLUSTER_AUTHORIZATION_FAILED for every partition otherwise); a
broker that is not the controller answers NOT_CONTROLLER for every partition. No partitions named:
every partition, and those that needed no election left out of the answer. Deviation: answered once
the states are written and the brokers told, without waiting for the new leaders' metadata (Kafka's
DelayedElectLeader).

A single broker is its own controller and answers as Kafka 4's KRaft controller does
(server/metadata/local_controller.py): nothing ever needs an election there, and the answer's
shape is KRaft's (every topic listed when none is named, repeats kept, an unknown election type
refused). Refused authorization is Kafka's ElectLeadersRequest.getErrorResponse: the error for the
request and for every partition named; Kafka's message there names the whole request, Samsa's is
the error's own."""

from __future__ import annotations

from ...wire.errors import ErrorCode
from ...wire.messages.elect_leaders_response import PartitionResult, ReplicaElectionResult
from ...wire.protocol import ApiKey, response_class
from ..metadata.local_controller import LocalController
from ..security.authorizer import ALTER, CLUSTER
from . import handler

ElectLeadersResponse = response_class(ApiKey.ELECT_LEADERS)
UNCLEAN = 1
MESSAGES = {
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION: "The partition does not exist.",
    ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE: "Failed to elect leader for partition {} under strategy "
                                              "PreferredReplicaPartitionLeaderElectionStrategy",
    ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE: "Failed to elect leader for partition {} under strategy "
                                              "OfflinePartitionLeaderElectionStrategy(true)",
}


@handler(ApiKey.ELECT_LEADERS, 0, 2, forwarded=True)
async def handle(ctx, request):
    controller = ctx.services.controller
    if isinstance(controller, LocalController):
        return _single_broker(ctx, controller, request)
    named = None if request.topic_partitions is None else [
        (t.topic, p) for t in request.topic_partitions for p in t.partitions]
    if not ctx.authorize(ALTER, CLUSTER):
        return _response(dict.fromkeys(named or [], ErrorCode.CLUSTER_AUTHORIZATION_FAILED),
                         ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
    unclean = ctx.api_version >= 1 and request.election_type == UNCLEAN
    results = None
    if controller is not None and controller.is_active:
        partitions = named if named is not None else controller.controller.all_partitions()
        answer = await controller.call("elect_leaders", partitions, unclean)
        results = None if answer is None else answer[0]
    if results is None:
        return _response(dict.fromkeys(named or [], ErrorCode.NOT_CONTROLLER), ErrorCode.NONE)
    if named is None:
        results = {tp: e for tp, e in results.items() if e != ErrorCode.ELECTION_NOT_NEEDED}
    return _response(results, ErrorCode.NONE)


def _response(results: dict[tuple[str, int], int], error: int):
    by_topic: dict[str, ReplicaElectionResult] = {}
    for (topic, partition), code in results.items():
        result = by_topic.setdefault(topic, ReplicaElectionResult(topic))
        message = MESSAGES.get(ErrorCode(code))
        result.partition_result.append(PartitionResult(
            partition, code, message.format(f"{topic}-{partition}") if message else None))
    return ElectLeadersResponse(error_code=error, replica_election_results=list(by_topic.values()))


def _single_broker(ctx, controller: LocalController, request):
    named = None if request.topic_partitions is None else [
        (t.topic, list(t.partitions)) for t in request.topic_partitions]
    if ctx.authorize(ALTER, CLUSTER):
        error, results = controller.elect_leaders(named, request.election_type if ctx.api_version >= 1 else 0)
    else:
        error = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
        message = ErrorCode.CLUSTER_AUTHORIZATION_FAILED.message
        results = [(topic, [(p, error, message) for p in partitions]) for topic, partitions in named or []]
    return ElectLeadersResponse(error_code=error, replica_election_results=[
        ReplicaElectionResult(topic, [PartitionResult(p, code, message) for p, code, message in partitions])
        for topic, partitions in results])
