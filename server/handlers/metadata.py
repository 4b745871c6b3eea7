"""Metadata (key 3), v0-13: brokers, controller, topics and partitions, creating topics on demand.
Follows KafkaApis.handleTopicMetadataRequest and AutoTopicCreationManager, with Kafka's authorization
(DESCRIBE to see a topic, CREATE on the cluster or topic to auto-create it). v13 (KIP-1102) adds a
top-level error code, which Kafka sets only in the answer to a request that failed as a whole.
From v12 topics may be asked for by id (an unknown one: UNKNOWN_TOPIC_ID, unknown ids first); once
one is, names are ignored, as Kafka does.
The brokers, the controller and the partitions are the MetadataCache's (server/metadata/cache.py: a
single broker is every partition's leader, replica and ISR, and the controller; a ZooKeeper cluster's
are the controller's last UpdateMetadata, Kafka's ZkMetadataCache.getTopicMetadata); a topic created
on first need is the AdminManager's (server/metadata/admin_manager.py).
Deviations: the single broker answers an auto-created topic at once with its partitions, where Kafka
first answers LEADER_NOT_AVAILABLE while the controller creates it.
"""

from __future__ import annotations

import logging
import uuid

from ...wire.errors import ErrorCode
from ...wire.protocol import ApiKey, request_class, response_class
from ..security.authorizer import CLUSTER, CREATE, DESCRIBE, TOPIC
from ..metadata.cache import InvalidTopicError, validate_topic_name
from . import handler

log = logging.getLogger("samsa.metadata")
MetadataResponse = response_class(ApiKey.METADATA)
Metadata = request_class(ApiKey.METADATA)
Topic = MetadataResponse.MetadataResponseTopic
PartitionMeta = MetadataResponse.MetadataResponsePartition
Broker = MetadataResponse.MetadataResponseBroker
AUTHORIZED_OPERATIONS_OMITTED = -2147483648
ZERO_UUID = uuid.UUID(int=0)


def topic_metadata(ctx, topic, include_operations: bool) -> object:
    partitions = ctx.services.metadata_cache.partition_metadata(
        topic.name, ctx.listener, error_unavailable_endpoints=ctx.api_version == 0,
        error_unavailable_listeners=ctx.api_version >= 6) or []
    return Topic(error_code=ErrorCode.NONE, name=topic.name, topic_id=topic.topic_id,
                 is_internal=topic.is_internal,
                 partitions=[PartitionMeta(error_code=p.error_code, partition_index=p.partition_index,
                                           leader_id=p.leader_id, leader_epoch=p.leader_epoch,
                                           replica_nodes=p.replica_nodes, isr_nodes=p.isr_nodes,
                                           offline_replicas=p.offline_replicas) for p in partitions],
                 topic_authorized_operations=(ctx.authorized_operations(TOPIC, topic.name) if include_operations
                                              else AUTHORIZED_OPERATIONS_OMITTED))


def brokers_and_controller(ctx) -> tuple[list, int]:
    """The brokers a client on this listener can reach, and the controller's id (-1: none known)."""
    cache = ctx.services.metadata_cache
    controller_id = cache.controller_id
    return cache.alive_nodes(ctx.listener), -1 if controller_id is None else controller_id


def cluster_authorized_operations(ctx) -> int:
    """What Metadata v8-10 and DescribeCluster report: nothing without DESCRIBE on the cluster."""
    return ctx.authorized_operations(CLUSTER) if ctx.authorize(DESCRIBE, CLUSTER) else 0


def unauthorized(name: str | None, topic_id=ZERO_UUID):
    """A topic the sender may not see or create, its existence not disclosed: asked by name, no id
    comes back (topic ids are not secret, so asked by id, the id does)."""
    return Topic(error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED, name=name, topic_id=topic_id, is_internal=False)


@handler(ApiKey.METADATA, 0, 13)
async def handle(ctx, request):
    services = ctx.services
    image = services.metadata_cache
    include_ops = ctx.api_version >= 8 and request.include_topic_authorized_operations
    allow_auto = ((ctx.api_version < 4 or request.allow_auto_topic_creation)
                  and services.config.get("auto.create.topics.enable"))
    topics = []

    def failed(name: str, error_code: int) -> object:
        # Kafka fills in the operations of every topic it answers for by name and the caller may
        # describe, an unknown one included.
        return Topic(error_code=error_code, name=name, is_internal=False,
                     topic_authorized_operations=(ctx.authorized_operations(TOPIC, name) if include_ops
                                                  else AUTHORIZED_OPERATIONS_OMITTED))

    if request.topics is None or (ctx.api_version == 0 and not request.topics):
        topics = [topic_metadata(ctx, t, include_ops) for t in image.topics.values()
                  if ctx.authorize(DESCRIBE, TOPIC, t.name, log_if_denied=False)]
    else:
        wanted_topics = request.topics
        by_id = ctx.api_version >= 12 and any(t.topic_id != ZERO_UUID for t in wanted_topics)
        if by_id:
            # From v12, as Kafka's handleTopicMetadataRequest: once any topic is asked for by id, only
            # ids count (names ignored, a topic without an id left out), each id once, unknown first.
            ids = list(dict.fromkeys(t.topic_id for t in wanted_topics if t.topic_id != ZERO_UUID))
            ids.sort(key=lambda i: i in image.topics_by_id)
            wanted_topics = [Metadata.MetadataRequestTopic(name=None, topic_id=i) for i in ids]
        for wanted in wanted_topics:
            name = wanted.name
            if name is None:
                topic = image.topics_by_id.get(wanted.topic_id)
                if topic is None:
                    topics.append(Topic(error_code=ErrorCode.UNKNOWN_TOPIC_ID, name=None, topic_id=wanted.topic_id))
                    continue
                if not ctx.authorize(DESCRIBE, TOPIC, topic.name):
                    topics.append(unauthorized(None, wanted.topic_id))
                    continue
            else:
                if not ctx.authorize(DESCRIBE, TOPIC, name):
                    topics.append(unauthorized(name))
                    continue
                topic = image.topics.get(name)
            if topic is None:
                if allow_auto and not (ctx.authorize(CREATE, CLUSTER, log_if_denied=False)
                                       or ctx.authorize(CREATE, TOPIC, name)):
                    topics.append(unauthorized(name))
                    continue
                try:
                    validate_topic_name(name)
                except InvalidTopicError:
                    topics.append(failed(name, ErrorCode.INVALID_TOPIC_EXCEPTION))
                    continue
                if allow_auto and image.collides(name) is None:
                    code, topic = await services.admin.auto_create_topic(services, name)
                    if topic is None:
                        topics.append(failed(name, code))
                        continue
                else:
                    topics.append(failed(name, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION))
                    continue
            topics.append(topic_metadata(ctx, topic, include_ops))
    brokers, controller_id = brokers_and_controller(ctx)
    return MetadataResponse(
        throttle_time_ms=0,
        brokers=[Broker(node_id=b.node_id, host=b.host, port=b.port, rack=b.rack) for b in brokers],
        cluster_id=services.cluster_id,
        controller_id=controller_id,
        topics=topics,
        cluster_authorized_operations=(cluster_authorized_operations(ctx)
                                       if 8 <= ctx.api_version <= 10 and request.include_cluster_authorized_operations
                                       else AUTHORIZED_OPERATIONS_OMITTED),
    )
