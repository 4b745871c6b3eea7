"""CreateTopics (key 19), v0-7: validate names, counts and configs, then create (unless validate_only).
Follows ControllerApis.createTopics and ReplicationControlManager.createTopics (Kafka's messages),
with CREATE on the cluster or topic, DESCRIBE_CONFIGS to see the configs, and the controller
mutation quota (KIP-599).
Deviations: one broker, so a replication factor above 1 or an assignment naming another broker is
refused; create.topic.policy.class.name is accepted but never applied (no Java policies here).
"""

from __future__ import annotations

from collections import Counter

from ...storage.errors import InvalidConfigurationException, KafkaStorageException
from ...storage.log_config import LogConfig
from ...wire.errors import ErrorCode
from ...wire.protocol import ApiKey, response_class
from ..authorizer import CLUSTER, CREATE, DESCRIBE_CONFIGS, TOPIC
from ..metadata import InvalidTopicError, validate_topic_name
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
    try:
        validate_topic_name(topic.name)
    except InvalidTopicError as e:
        raise TopicError(ErrorCode.INVALID_TOPIC_EXCEPTION, str(e)) from None
    if topic.name in services.metadata.topics:
        raise TopicError(ErrorCode.TOPIC_ALREADY_EXISTS, f"Topic '{topic.name}' already exists.")
    clash = services.metadata.collides(topic.name)
    if clash is not None:
        raise TopicError(ErrorCode.INVALID_TOPIC_EXCEPTION,
                         f"Topic '{topic.name}' collides with existing topic: {clash}")
    if topic.assignments:
        if topic.num_partitions != -1 or topic.replication_factor != -1:
            raise TopicError(ErrorCode.INVALID_REQUEST,
                             "Both numPartitions or replicationFactor and replicasAssignments were set. "
                             "Both cannot be used at the same time.")
        for a in topic.assignments:
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
    if replication > 1:
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


def config_entries(ctx, configs: dict[str, str]):
    entries = ctx.services.config.describe_topic_configs(configs)
    return [ConfigEntry(name=e.name, value=e.value, read_only=e.read_only, config_source=e.source,
                        is_sensitive=e.is_sensitive) for e in entries]


def error_result(name: str, code: int, message: str):
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
    for topic in request.topics:
        if counts[topic.name] > 1:
            results.append(error_result(topic.name, ErrorCode.INVALID_REQUEST, "Found multiple entries for this topic."))
            continue
        if topic.name not in creatable:
            results.append(error_result(topic.name, ErrorCode.TOPIC_AUTHORIZATION_FAILED, "Authorization failed."))
            continue
        try:
            partitions, replication, configs = check(ctx, topic)
        except TopicError as e:
            results.append(error_result(topic.name, e.code, str(e)))
            continue
        if not record_mutations(mutations, partitions):
            results.append(error_result(topic.name, ErrorCode.THROTTLING_QUOTA_EXCEEDED,
                                        THROTTLING_QUOTA_EXCEEDED_MESSAGE))
            continue
        topic_id = None
        if not request.validate_only:
            try:
                created = ctx.services.replica_manager.create_topic(topic.name, partitions, configs, replication)
                topic_id = created.topic_id
            except KafkaStorageException as e:
                results.append(error_result(topic.name, e.error_code, str(e)))
                continue
        if topic.name not in describable and ctx.api_version >= 5:
            result = Result(name=topic.name, error_code=ErrorCode.NONE, configs=[],
                            topic_config_error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED)
        else:
            result = Result(name=topic.name, error_code=ErrorCode.NONE, num_partitions=partitions,
                            replication_factor=replication,
                            configs=config_entries(ctx, configs) if ctx.api_version >= 5 else None)
        if topic_id is not None:
            result.topic_id = topic_id
        results.append(result)
    finish_mutations(ctx, mutations)
    return CreateTopicsResponse(throttle_time_ms=0, topics=results)
