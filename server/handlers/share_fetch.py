"""ShareFetch (key 78), v1-2: a share group member's fetch (KIP-932), as Kafka 4.4's
KafkaApis.handleShareFetchRequest answers it.

The member fetches in its share session (server/share/share_session_cache.py: epoch 0 opens it
with the partitions named, later epochs add and forget partitions and read all of the session's,
-1 closes it and reads nothing). Acknowledgements it carries are applied first (as ShareAcknowledge
applies them, share_acknowledge.py), then the fetch long-polls as Fetch does until `min_bytes` or
`max_wait_ms` (server/share/delayed_share_fetch.py) and answers the records it acquired for the
member: whole batches from the log file, sent with sendfile, with the acquired offset ranges as
AcquiredRecords, at most `max_records` (KIP-1206: `share_acquire_mode` record_limit keeps exactly to
it) in ranges of about `batch_size`. `acquisition_lock_timeout_ms` says how long the member holds
them. With `is_renew_ack` (v2, KIP-1222) the request only renews (RENEW acknowledgements) and
fetches nothing; its max_bytes, min_bytes, max_records and max_wait_ms must all be 0.

Kafka checks READ on the GROUP first, then READ on each TOPIC fetched or acknowledged. Membership
of the group is not checked here (Kafka's ShareFetch does not ask the group coordinator): the
share session is keyed by the member id the client gives. A partition this broker no longer leads
names its current leader, and the response that leader's endpoint.
"""

from __future__ import annotations

from itertools import chain
from typing import Any

import trio

from ...wire.errors import ErrorCode
from ...wire.protocol import ApiKey, response_class
from ..features import SHARE_GROUPS
from ..share.delayed_share_fetch import SharePartitionData, ShareFetchParams, delayed_share_fetch
from ..share.share_partition_manager import is_read_committed
from ..share.share_session_cache import (
    FINAL_EPOCH,
    ShareFetchContext,
    ShareSessionError,
    TopicIdPartition,
)
from ..throttle import fetch_max_bytes, not_request_time, record_fetch
from . import handler
from .share_acknowledge import (
    LEADER_MOVED_ERRORS,
    Results,
    partition_exists,
    acknowledgement_batches,
    authorized_topics,
    current_leader,
    request_error,
    node_endpoints,
    start_acknowledgements,
)

ShareFetchResponse = response_class(ApiKey.SHARE_FETCH)


def requested_partitions(ctx, request) -> tuple[list[TopicIdPartition], list[TopicIdPartition]]:
    """The partitions the request fetches and those it forgets, with their topic names (None for
    an unknown topic id; ShareFetchRequest.shareFetchData and forgottenTopics)."""
    by_id = ctx.services.metadata_cache.topics_by_id

    def name(topic_id) -> str | None:
        topic = by_id.get(topic_id)
        return None if topic is None else topic.name

    wanted = [TopicIdPartition(t.topic_id, p.partition_index, name(t.topic_id))
              for t in request.topics for p in t.partitions]
    forgotten = [TopicIdPartition(t.topic_id, index, name(t.topic_id))
                 for t in request.forgotten_topics_data for index in t.partitions]
    return wanted, forgotten


def renew_only_errors(request) -> str:
    """What a renew acknowledgement request (KIP-1222) sets that it must not."""
    return "".join(f"{field} must be set to 0, " for field, value in (
        ("maxBytes", request.max_bytes), ("minBytes", request.min_bytes), ("maxRecords", request.max_records),
        ("maxWaitMs", request.max_wait_ms)) if value != 0)


@handler(ApiKey.SHARE_FETCH, 1, 2, feature=SHARE_GROUPS)
async def handle(ctx, request):
    if (error := request_error(ctx, request)) is not None:
        return ShareFetchResponse(error_code=error)
    group_id, member_id = request.group_id, request.member_id
    manager = ctx.services.share_partitions
    epoch = request.share_session_epoch
    acknowledging = any(p.acknowledgement_batches for t in request.topics for p in t.partitions)
    wanted, forgotten = requested_partitions(ctx, request)
    renew = ctx.api_version >= 2 and request.is_renew_ack
    if renew and renew_only_errors(request):
        return ShareFetchResponse(error_code=ErrorCode.INVALID_REQUEST)
    try:
        context = manager.sessions.new_context(group_id, member_id, epoch, wanted, forgotten, acknowledging,
                                               ctx.connection.id)
    except ShareSessionError as e:
        if e.error_code == ErrorCode.SHARE_SESSION_LIMIT_REACHED:
            # Kafka answers once max_wait_ms has passed (its IdleShareFetchTimerTask): a client
            # retrying at once would find the cache as full.
            with not_request_time(ctx):
                await trio.sleep(max(request.max_wait_ms, 0) / 1000)
        return ShareFetchResponse(error_code=e.error_code)
    erroneous, valid = context.erroneous_and_valid()
    allowed = authorized_topics(ctx, chain(erroneous, valid, wanted))
    pending = None
    acknowledged: Results = {}
    if acknowledging:
        batches, unknown = acknowledgement_batches(ctx, request.topics)
        pending, acknowledged = start_acknowledgements(ctx, group_id, member_id, batches, unknown, allowed,
                                                       ctx.api_version == 2, renew)

    async def complete_acknowledgements() -> None:
        assert pending is not None
        acknowledged.update(await pending.complete(manager))

    async with trio.open_nursery() as nursery:
        if pending is not None:
            nursery.start_soon(complete_acknowledgements)
        fetched = {} if renew else await fetch(ctx, request, group_id, member_id, erroneous, valid, allowed)
    response = build_response(ctx, context, fetched, acknowledged, manager.record_lock_duration_ms(group_id))
    if epoch == FINAL_EPOCH:
        manager.release_session(group_id, member_id)
    return response


async def fetch(ctx, request, group_id: str, member_id: str, erroneous: dict[TopicIdPartition, int],
                valid: list[TopicIdPartition], allowed: set[str]) -> dict[TopicIdPartition, SharePartitionData]:
    """KafkaApis.handleFetchFromShareFetchRequest: the partitions refused at once, and what the
    others fetched."""
    results = {tip: SharePartitionData(error_code=code) for tip, code in erroneous.items()}
    image = ctx.services.metadata_cache
    interested = []
    for tip in valid:
        if tip.topic not in allowed:
            results[tip] = SharePartitionData(error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED)
        elif not partition_exists(image, tip):
            results[tip] = SharePartitionData(error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        else:
            interested.append(tip)
    if not interested:
        return results
    manager = ctx.services.share_partitions
    max_bytes = min(request.max_bytes, ctx.services.config.get_int("fetch.max.bytes"))
    quota_bytes = fetch_max_bytes(ctx)
    if quota_bytes is not None:
        max_bytes = min(max_bytes, quota_bytes)
    params = ShareFetchParams(
        max_wait_ms=request.max_wait_ms, min_bytes=min(request.min_bytes, max_bytes), max_bytes=max_bytes,
        max_records=request.max_records, batch_size=request.batch_size,
        acquire_mode=request.share_acquire_mode if ctx.api_version >= 2 else 0,
        read_committed=is_read_committed(manager.share_config(group_id)))
    fetched = await delayed_share_fetch(manager, group_id, member_id, params, interested,
                                        request.share_session_epoch, lambda: not_request_time(ctx))
    fetched.update(results)
    return fetched


def build_response(ctx, context: ShareFetchContext, fetched: dict[TopicIdPartition, SharePartitionData],
                   acknowledged: Results, lock_timeout_ms: int):
    """KafkaApis.processShareFetchResponse, then the acknowledgements' answers merged in."""
    Response = ShareFetchResponse
    size = sum(data.size for data in fetched.values())
    named: list[TopicIdPartition] = []
    if record_fetch(ctx, size):
        error = context.throttled_error()
    else:
        error, named = context.response_partitions(
            {tip: (data.size > 0, data.error_code) for tip, data in fetched.items()})
    topics: dict[Any, Any] = {}
    nodes: dict[int, Any] = {}
    partitions: dict[tuple[Any, int], Any] = {}

    def entry(tip: TopicIdPartition):
        topic = topics.get(tip.topic_id)
        if topic is None:
            topic = topics[tip.topic_id] = Response.ShareFetchableTopicResponse(topic_id=tip.topic_id, partitions=[])
        return topic

    stats = ctx.services.replica_manager.topic_stats
    for tip in named:
        data = fetched[tip]
        partition = Response.PartitionData(
            partition_index=tip.partition, error_code=data.error_code,
            records=data.records if data.size else b"",
            acquired_records=[Response.AcquiredRecords(first_offset=a.first_offset, last_offset=a.last_offset,
                                                       delivery_count=a.delivery_count)
                              for a in data.acquired_records])
        if data.error_code in LEADER_MOVED_ERRORS:
            leader, epoch, node = current_leader(ctx, tip.topic, tip.partition)
            partition.current_leader = Response.LeaderIdAndEpoch(leader_id=leader, leader_epoch=epoch)
            if node is not None:
                nodes[node.node_id] = node
        if data.size and tip.topic is not None:
            stats.of_existing(tip.topic).bytes_out += data.size  # Kafka's updateBytesOut
        entry(tip).partitions.append(partition)
        partitions[tip.key] = partition
    for tip, (code, message) in acknowledged.items():
        partition = partitions.get(tip.key)
        if partition is None:
            partition = partitions[tip.key] = Response.PartitionData(partition_index=tip.partition, records=b"")
            entry(tip).partitions.append(partition)
        partition.acknowledge_error_code = code
        partition.acknowledge_error_message = message
    return Response(error_code=error, acquisition_lock_timeout_ms=lock_timeout_ms, responses=list(topics.values()),
                    node_endpoints=node_endpoints(Response, nodes.values()))
