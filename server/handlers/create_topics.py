"""CreateTopics (key 19), v0-7: validate names, counts and configs, then create (unless validate_only).
Follows ControllerApis.createTopics and ReplicationControlManager.createTopics (Kafka's messages),
with CREATE on the cluster or topic, DESCRIBE_CONFIGS to see the configs, and the controller
mutation quota (KIP-599).
Deviations: one broker, so a replication factor above 1 or an assignment naming another broker is
refused; create.topic.policy.class.name is accepted but never applied (no Java policies here).
In a ZooKeeper cluster the topic is written to ZooKeeper as Kafka 3.9's ZkAdminManager and
AdminZkClient do (replicas over the live brokers by AdminUtils' assignment, server/zookeeper/replica_assignment.py,
or as asked; /config/topics/<t>, then /brokers/topics/<t>), the controller creates it, and the answer
waits up to timeout_ms for the controller's UpdateMetadata to give every partition a leader
(REQUEST_TIMED_OUT otherwise).
"""

from __future__ import annotations

import uuid
from collections import Counter

from ...storage.errors import InvalidConfigurationException, KafkaStorageException
from ...storage.log_config import LogConfig
from ...wire.errors import ErrorCode
from ...wire.protocol import ApiKey, response_class
from ..security.authorizer import CLUSTER, CREATE, DESCRIBE_CONFIGS, TOPIC
from ..metadata.image import InvalidTopicError, validate_topic_name
from ..zookeeper import admin as zk_admin
from ..zookeeper.replica_assignment import AdminOperationError, InvalidReplicationFactor, assign_replicas_to_brokers
from ..throttle import THROTTLING_QUOTA_EXCEEDED_MESSAGE, finish_mutations, mutation_quota, record_mutations
from . import handler

CreateTopicsResponse = response_class(ApiKey.CREATE_TOPICS)
Result = CreateTopicsResponse.CreatableTopicResult
ConfigEntry = CreateTopicsResponse.CreatableTopicConfigs


class TopicError(Exception):
    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code


def check(ctx, topic) -> tuple[int, int, dict[str, str]]:
    """(partitions, replication factor, configs) to create, or raise TopicError."""
    services = ctx.services
    known = services.metadata if services.zk_metadata is None else services.zk_metadata
    try:
        validate_topic_name(topic.name)
    except InvalidTopicError as e:
        raise TopicError(ErrorCode.INVALID_TOPIC_EXCEPTION, str(e)) from None
    if topic.name in known.topics:
        raise TopicError(ErrorCode.TOPIC_ALREADY_EXISTS, f"Topic '{topic.name}' already exists.")
    clash = known.collides(topic.name)
    if clash is not None:
        raise TopicError(ErrorCode.INVALID_TOPIC_EXCEPTION,
                         f"Topic '{topic.name}' collides with existing topic: {clash}")
    if topic.assignments:
        if topic.num_partitions != -1 or topic.replication_factor != -1:
            raise TopicError(ErrorCode.INVALID_REQUEST,
                             "Both numPartitions or replicationFactor and replicasAssignments were set. "
                             "Both cannot be used at the same time.")
        for a in topic.assignments if services.zk_metadata is None else ():  # a cluster's: cluster_assignment
            if any(b != services.node_id for b in a.broker_ids) or not a.broker_ids:
                raise TopicError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                                 f"The manual partition assignment includes a broker that is not registered: {a.broker_ids}")
        partitions = len(topic.assignments)
        replication = len(topic.assignments[0].broker_ids)
    else:
        partitions = services.config.get("num.partitions") if topic.num_partitions == -1 else topic.num_partitions
        replication = (services.config.get("default.replication.factor") if topic.replication_factor == -1
                       else topic.replication_factor)
    if partitions <= 0:
        raise TopicError(ErrorCode.INVALID_PARTITIONS, "Number of partitions was set to an invalid non-positive value.")
    if replication <= 0:
        raise TopicError(ErrorCode.INVALID_REPLICATION_FACTOR,
                         "Replication factor must be larger than 0, or -1 to use the default value.")
    if replication > 1 and services.zk_metadata is None:
        raise TopicError(ErrorCode.INVALID_REPLICATION_FACTOR,
                         f"Unable to replicate the partition {replication} time(s): The target replication factor "
                         f"of {replication} cannot be reached because only 1 broker(s) are registered.")
    configs: dict[str, str] = {}
    for c in topic.configs:
        if c.value is None:
            raise TopicError(ErrorCode.INVALID_CONFIG, f"Null value not supported for topic configs: {c.name}")
        configs[c.name] = c.value
    try:
        LogConfig.from_props(configs, base=services.config.log_config())
    except InvalidConfigurationException as e:
        raise TopicError(ErrorCode.INVALID_CONFIG, str(e.args[-1])) from None
    return partitions, replication, configs


def cluster_assignment(ctx, topic, partitions: int, replication: int) -> dict[int, list[int]]:
    """The replicas of each partition in a ZooKeeper cluster (Kafka's ZkAdminManager.createTopics):
    as asked, or by AdminUtils' assignment over the live brokers."""
    alive = ctx.services.zk_metadata.alive_brokers
    if topic.assignments:
        # AdminZkClient.validateTopicCreate; brokers not alive are allowed, as Kafka allows them.
        assignment = {a.partition_index: list(a.broker_ids) for a in topic.assignments}
        if len({len(replicas) for replicas in assignment.values()}) != 1:
            raise TopicError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                             "All partitions should have the same number of replicas")
        if any(len(set(replicas)) != len(replicas) for replicas in assignment.values()):
            raise TopicError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                             f"Duplicate replica assignment found: {assignment}")
        if sorted(assignment) != list(range(len(assignment))):
            raise TopicError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                             "partitions should be a consecutive 0-based integer sequence")
        return assignment
    try:
        return assign_replicas_to_brokers([(b.node_id, b.rack) for b in alive.values()], partitions, replication)
    except InvalidReplicationFactor as e:
        raise TopicError(ErrorCode.INVALID_REPLICATION_FACTOR, str(e)) from None
    except AdminOperationError as e:
        raise TopicError(ErrorCode.UNKNOWN_SERVER_ERROR, str(e)) from None


async def create_in_zookeeper(ctx, name: str, assignment: dict[int, list[int]], configs: dict[str, str]) -> uuid.UUID:
    """Write the topic for the controller (TopicError when it exists); its id."""
    try:
        return await zk_admin.create_topic(ctx.services, name, assignment, configs)
    except zk_admin.AdminError as e:
        raise TopicError(e.code, str(e)) from None


def config_entries(ctx, configs: dict[str, str]):
    entries = ctx.services.config.describe_topic_configs(configs)
    return [ConfigEntry(name=e.name, value=e.value, read_only=e.read_only, config_source=e.source,
                        is_sensitive=e.is_sensitive) for e in entries]


def error_result(name: str, code: int, message: str | None):
    """A refused topic: no partitions, no replicas, and (v5+) an empty configs array, as Kafka's
    controller answers it."""
    return Result(name=name, error_code=code, error_message=message, num_partitions=-1, replication_factor=-1,
                  configs=[])


@handler(ApiKey.CREATE_TOPICS, 0, 7)
async def handle(ctx, request):
    counts = Counter(t.name for t in request.topics)
    # CREATE on the cluster or on the topic; its configs come back only with DESCRIBE_CONFIGS on it.
    creatable = (counts.keys() if ctx.authorize(CREATE, CLUSTER, log_if_denied=False)
                 else ctx.authorized(CREATE, TOPIC, counts))
    describable = ctx.authorized(DESCRIBE_CONFIGS, TOPIC, counts, log_if_denied=False)
    mutations = mutation_quota(ctx, strict_since_version=6)
    results = []
    waiting: dict[str, int] = {}  # created in ZooKeeper, waiting for leaders: name -> partitions
    for topic in request.topics:
        if counts[topic.name] > 1:
            results.append(error_result(topic.name, ErrorCode.INVALID_REQUEST, "Found multiple entries for this topic."))
            continue
        if topic.name not in creatable:
            results.append(error_result(topic.name, ErrorCode.TOPIC_AUTHORIZATION_FAILED, "Authorization failed."))
            continue
        try:
            partitions, replication, configs = check(ctx, topic)
            assignment = (cluster_assignment(ctx, topic, partitions, replication)
                          if ctx.services.zk_metadata is not None else None)
        except TopicError as e:
            results.append(error_result(topic.name, e.code, str(e)))
            continue
        if not record_mutations(mutations, partitions):
            results.append(error_result(topic.name, ErrorCode.THROTTLING_QUOTA_EXCEEDED,
                                        THROTTLING_QUOTA_EXCEEDED_MESSAGE))
            continue
        topic_id = None
        if not request.validate_only and assignment is not None:
            try:
                topic_id = await create_in_zookeeper(ctx, topic.name, assignment, configs)
            except TopicError as e:
                results.append(error_result(topic.name, e.code, str(e)))
                continue
            waiting[topic.name] = partitions
        elif not request.validate_only:
            try:
                created = ctx.services.replica_manager.create_topic(topic.name, partitions, configs, replication)
                topic_id = created.topic_id
            except KafkaStorageException as e:
                results.append(error_result(topic.name, e.error_code, str(e)))
                continue
        if topic.name not in describable and ctx.api_version >= 5:
            result = Result(name=topic.name, error_code=ErrorCode.NONE, error_message=None, configs=[],
                            topic_config_error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED)
        else:
            result = Result(name=topic.name, error_code=ErrorCode.NONE, error_message=None, num_partitions=partitions,
                            replication_factor=replication,
                            configs=config_entries(ctx, configs) if ctx.api_version >= 5 else None)
        if topic_id is not None:
            result.topic_id = topic_id
        results.append(result)
    finish_mutations(ctx, mutations)
    if waiting and request.timeout_ms > 0:
        await wait_for_leaders(ctx, waiting, request.timeout_ms, results)
    return CreateTopicsResponse(throttle_time_ms=0, topics=results)


async def wait_for_leaders(ctx, waiting: dict[str, int], timeout_ms: int, results: list) -> None:
    """Until the controller's UpdateMetadata gives every new partition a leader, or timeout_ms; the
    topics still without one answer REQUEST_TIMED_OUT."""
    leaderless = await ctx.services.zk_metadata.wait_for_leaders(waiting, timeout_ms)
    for i, result in enumerate(results):
        if result.name in leaderless:
            results[i] = error_result(result.name, ErrorCode.REQUEST_TIMED_OUT, None)
