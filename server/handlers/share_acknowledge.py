"""ShareAcknowledge (key 79), v1-2: a share group member acknowledges records it acquired, ACCEPT,
RELEASE, REJECT or (v2, KIP-1222) RENEW, in its share session, as Kafka 4.4's
KafkaApis.handleShareAcknowledgeRequest answers it. What validates and applies acknowledgements
here serves ShareFetch's piggybacked ones too (share_fetch.py).

The request needs READ on its GROUP, and READ on each TOPIC it acknowledges in. Its epoch must be
the session's (0 cannot open one: INVALID_SHARE_SESSION_EPOCH); -1 acknowledges, then closes the
session, releasing what the member still holds. A partition is answered once the persister has
its new state. A partition this broker no longer leads names its current leader, and the
response that leader's endpoint (NOT_LEADER_OR_FOLLOWER, FENCED_LEADER_EPOCH).
"""

from __future__ import annotations

from collections.abc import Iterable

from ...coordinator.share_partition import AcknowledgeType, ShareAcknowledgementBatch
from ...wire.errors import ErrorCode
from ...wire.protocol import ApiKey, response_class
from ..features import SHARE_GROUPS
from ..security.authorizer import GROUP, READ, TOPIC
from ..share.share_partition_manager import PendingAcknowledgements
from ..share.share_session_cache import FINAL_EPOCH, ShareSessionError, TopicIdPartition
from . import handler

ShareAcknowledgeResponse = response_class(ApiKey.SHARE_ACKNOWLEDGE)
MAX_MEMBER_ID_LENGTH = 36  # KafkaApis.isMemberIdValid
LEADER_MOVED_ERRORS = (ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.FENCED_LEADER_EPOCH)

Results = dict[TopicIdPartition, tuple[int, str | None]]


def member_id_valid(member_id: str | None) -> bool:
    return bool(member_id) and len(member_id) <= MAX_MEMBER_ID_LENGTH  # type: ignore[arg-type]


def request_error(ctx, request) -> int | None:
    """What a ShareFetch or ShareAcknowledge is refused before its partitions are read, as KafkaApis
    checks them in this order: no group id, no READ on the group, a member id Kafka never makes."""
    if request.group_id is None:
        return ErrorCode.INVALID_REQUEST
    if not ctx.authorize(READ, GROUP, request.group_id):
        return ErrorCode.GROUP_AUTHORIZATION_FAILED
    if not member_id_valid(request.member_id):
        return ErrorCode.INVALID_REQUEST
    return None


def acknowledgement_batches(ctx, topics) -> tuple[dict[TopicIdPartition, list[ShareAcknowledgementBatch]], Results]:
    """Each partition's acknowledgement batches; partitions of unknown topic ids answered
    UNKNOWN_TOPIC_ID (KafkaApis.getAcknowledgeBatchesFrom*Request)."""
    by_id = ctx.services.metadata_cache.topics_by_id
    batches: dict[TopicIdPartition, list[ShareAcknowledgementBatch]] = {}
    erroneous: Results = {}
    for t in topics:
        topic = by_id.get(t.topic_id)
        for p in t.partitions:
            if topic is None:
                erroneous[TopicIdPartition(t.topic_id, p.partition_index, None)] = (ErrorCode.UNKNOWN_TOPIC_ID, None)
                continue
            batches[TopicIdPartition(t.topic_id, p.partition_index, topic.name)] = [
                ShareAcknowledgementBatch(b.first_offset, b.last_offset, list(b.acknowledge_types))
                for b in p.acknowledgement_batches]
    return batches, erroneous


def invalid_batches(batches: list[ShareAcknowledgementBatch], supports_renew: bool, is_renew_ack: bool) -> bool:
    """KafkaApis.validateAcknowledgementBatches for one partition: ranges in order, not
    overlapping, one type or one per offset, types known to the version, RENEW only in a renew
    acknowledgement."""
    max_type = AcknowledgeType.RENEW if supports_renew else AcknowledgeType.REJECT
    previous_end = -1
    for batch in batches:
        types = batch.acknowledge_types
        if (batch.first_offset > batch.last_offset or batch.first_offset < previous_end or not types
                or (len(types) > 1 and batch.last_offset - batch.first_offset != len(types) - 1)
                or any(t < 0 or t > max_type for t in types)
                or (not is_renew_ack and any(t == AcknowledgeType.RENEW for t in types))):
            return True
        previous_end = batch.last_offset
    return False


def start_acknowledgements(ctx, group_id: str, member_id: str,
                           batches: dict[TopicIdPartition, list[ShareAcknowledgementBatch]], erroneous: Results,
                           authorized_topics: set[str], supports_renew: bool,
                           is_renew_ack: bool) -> tuple[PendingAcknowledgements | None, Results]:
    """Apply a request's acknowledgements (KafkaApis.handleAcknowledgements): what the share
    partitions took, their writes pending, and the partitions answered at once."""
    answered: Results = dict(erroneous)
    interested: dict[TopicIdPartition, list[ShareAcknowledgementBatch]] = {}
    image = ctx.services.metadata_cache
    for tip, partition_batches in batches.items():
        if invalid_batches(partition_batches, supports_renew, is_renew_ack):
            answered[tip] = (ErrorCode.INVALID_REQUEST, None)
        elif tip.topic not in authorized_topics:
            answered[tip] = (ErrorCode.TOPIC_AUTHORIZATION_FAILED, None)
        elif not partition_exists(image, tip):
            answered[tip] = (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, None)
        elif not partition_batches:
            answered[tip] = (ErrorCode.NONE, None)
        else:
            interested[tip] = partition_batches
    if not interested:
        return None, answered
    return ctx.services.share_partitions.acknowledge(group_id, member_id, interested), answered


def partition_exists(image, tip: TopicIdPartition) -> bool:
    topic = image.topics.get(tip.topic)
    return topic is not None and topic.topic_id == tip.topic_id and 0 <= tip.partition < topic.num_partitions


def authorized_topics(ctx, tips: Iterable[TopicIdPartition]) -> set[str]:
    """The topics among `tips` the sender may READ (Kafka's filterByAuthorized)."""
    return ctx.authorized(READ, TOPIC, {tip.topic for tip in tips if tip.topic is not None})


def current_leader(ctx, topic: str | None, partition: int):
    """The partition's leader and epoch, and its endpoint (KafkaApis.getCurrentLeader): the replica
    partition's here, else the metadata's."""
    leader, epoch = -1, -1
    replica = ctx.services.replica_manager.get(topic, partition) if topic is not None else None
    if replica is not None and not replica.is_offline:
        leader, epoch = replica.leader_id, replica.leader_epoch
    elif topic is not None:
        for meta in ctx.services.metadata_cache.partition_metadata(topic, ctx.listener) or ():
            if meta.partition_index == partition:
                leader, epoch = meta.leader_id, meta.leader_epoch
    node = ctx.services.metadata_cache.alive_node(leader, ctx.listener) if leader >= 0 else None
    return leader, epoch, node


@handler(ApiKey.SHARE_ACKNOWLEDGE, 1, 2, feature=SHARE_GROUPS)
async def handle(ctx, request):
    if (error := request_error(ctx, request)) is not None:
        return ShareAcknowledgeResponse(error_code=error)
    group_id, member_id = request.group_id, request.member_id
    manager = ctx.services.share_partitions
    epoch = request.share_session_epoch
    try:
        manager.sessions.acknowledge_session_update(group_id, member_id, epoch)
    except ShareSessionError as e:
        return ShareAcknowledgeResponse(error_code=e.error_code)
    batches, erroneous = acknowledgement_batches(ctx, request.topics)
    allowed = authorized_topics(ctx, batches)
    is_renew_ack = ctx.api_version >= 2 and request.is_renew_ack
    pending, results = start_acknowledgements(ctx, group_id, member_id, batches, erroneous, allowed,
                                              ctx.api_version == 2, is_renew_ack)
    if pending is not None:
        results.update(await pending.complete(manager))
    if epoch == FINAL_EPOCH:
        manager.release_session(group_id, member_id)
    # acquisition_lock_timeout_ms is a field of v2 on
    return response(ctx, results, manager.record_lock_duration_ms(group_id) if ctx.api_version >= 2 else 0)


def response(ctx, results: Results, lock_timeout_ms: int):
    Response = ShareAcknowledgeResponse
    topics: dict = {}
    nodes: dict = {}
    for tip, (code, message) in results.items():
        data = Response.PartitionData(partition_index=tip.partition, error_code=code, error_message=message)
        if code in LEADER_MOVED_ERRORS:
            leader, epoch, node = current_leader(ctx, tip.topic, tip.partition)
            data.current_leader = Response.LeaderIdAndEpoch(leader_id=leader, leader_epoch=epoch)
            if node is not None:
                nodes[node.node_id] = node
        entry = topics.get(tip.topic_id)
        if entry is None:
            entry = topics[tip.topic_id] = Response.ShareAcknowledgeTopicResponse(topic_id=tip.topic_id, partitions=[])
        entry.partitions.append(data)
    return Response(error_code=ErrorCode.NONE, acquisition_lock_timeout_ms=lock_timeout_ms,
                    responses=list(topics.values()), node_endpoints=node_endpoints(Response, nodes.values()))


def node_endpoints(response_type, nodes) -> list:
    return [response_type.NodeEndpoint(node_id=n.node_id, host=n.host, port=n.port, rack=n.rack) for n in nodes]
