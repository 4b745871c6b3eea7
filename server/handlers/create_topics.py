"""CreateTopics (key 19), v0-7: validate names, counts and configs, then create (unless validate_only).
Follows ControllerApis.createTopics and ReplicationControlManager.createTopics (Kafka's messages),
with CREATE on the cluster or topic, DESCRIBE_CONFIGS to see the configs, and the controller
mutation quota (KIP-599).
The replicas are placed and the topic created by the AdminManager (server/metadata/admin_manager.py:
at once by the single broker, which refuses a replication factor above 1 or an assignment naming
another broker; through ZooKeeper in a cluster); the answer waits up to timeout_ms for every
partition to have a leader (REQUEST_TIMED_OUT otherwise).
Deviations: create.topic.policy.class.name is accepted but never applied (no Java policies here).
"""

from __future__ import annotations

from collections import Counter

from ...storage.errors import InvalidConfigurationException
from ...storage.log_config import LogConfig
from ...wire.errors import ErrorCode
from ...wire.protocol import ApiKey, response_class
from ..security.authorizer import CLUSTER, CREATE, DESCRIBE_CONFIGS, TOPIC
from ..metadata.cache import InvalidTopicError, validate_topic_name, validate_topic_name_kraft
from ..metadata.admin_manager import AdminError
from ..throttle import THROTTLING_QUOTA_EXCEEDED_MESSAGE, finish_mutations, mutation_quota, record_mutations
from ...coordinator.client_metrics import java_hash_order
from . import ListenerType, handler

CreateTopicsResponse = response_class(ApiKey.CREATE_TOPICS)
Result = CreateTopicsResponse.CreatableTopicResult
ConfigEntry = CreateTopicsResponse.CreatableTopicConfigs


def check(ctx, topic) -> tuple[int, int, dict[str, str]]:
    """(partitions, replication factor, configs) to create, or raise AdminError."""
    services = ctx.services
    known = services.metadata_cache
    try:
        if services.listener_type == ListenerType.ZK_BROKER:
            validate_topic_name(topic.name)
        else:
            validate_topic_name_kraft(topic.name)
    except InvalidTopicError as e:
        raise AdminError(ErrorCode.INVALID_TOPIC_EXCEPTION, str(e)) from None
    if topic.name in known.topics:
        raise AdminError(ErrorCode.TOPIC_ALREADY_EXISTS, f"Topic '{topic.name}' already exists.")
    clash = known.collides(topic.name)
    if clash is not None:
        raise AdminError(ErrorCode.INVALID_TOPIC_EXCEPTION,
                         f"Topic '{topic.name}' collides with existing topic: {clash}")
    if topic.assignments:
        if topic.num_partitions != -1 or topic.replication_factor != -1:
            raise AdminError(ErrorCode.INVALID_REQUEST,
                             "Both numPartitions or replicationFactor and replicasAssignments were set. "
                             "Both cannot be used at the same time.")
        partitions = len(topic.assignments)
        replication = len(topic.assignments[0].broker_ids)
    else:
        partitions = services.config.get("num.partitions") if topic.num_partitions == -1 else topic.num_partitions
        replication = (services.config.get("default.replication.factor") if topic.replication_factor == -1
                       else topic.replication_factor)
    if partitions <= 0:
        raise AdminError(ErrorCode.INVALID_PARTITIONS, "Number of partitions was set to an invalid non-positive value.")
    if replication <= 0:
        raise AdminError(ErrorCode.INVALID_REPLICATION_FACTOR,
                         "Replication factor must be larger than 0, or -1 to use the default value.")
    configs: dict[str, str] = {}
    for c in topic.configs:
        if c.value is None:
            raise AdminError(ErrorCode.INVALID_CONFIG, f"Null value not supported for topic configs: {c.name}")
        configs[c.name] = c.value
    try:
        LogConfig.from_props(configs, base=services.config.log_config())
    except InvalidConfigurationException as e:
        raise AdminError(ErrorCode.INVALID_CONFIG, str(e.args[-1])) from None
    return partitions, replication, configs


def config_entries(ctx, configs: dict[str, str]):
    entries = ctx.services.config.describe_topic_configs(configs)
    return [ConfigEntry(name=e.name, value=e.value, read_only=e.read_only, config_source=e.source,
                        is_sensitive=e.is_sensitive) for e in entries]


def error_result(name: str, code: int, message: str | None):
    """A refused topic: no partitions, no replicas, and (v5+) an empty configs array, as Kafka's
    controller answers it."""
    return Result(name=name, error_code=code, error_message=message, num_partitions=-1, replication_factor=-1,
                  configs=[])


@handler(ApiKey.CREATE_TOPICS, 0, 7, forwarded=True)
async def handle(ctx, request):
    counts = Counter(t.name for t in request.topics)
    # CREATE on the cluster or on the topic; its configs come back only with DESCRIBE_CONFIGS on it.
    creatable = (counts.keys() if ctx.authorize(CREATE, CLUSTER, log_if_denied=False)
                 else ctx.authorized(CREATE, TOPIC, counts))
    describable = ctx.authorized(DESCRIBE_CONFIGS, TOPIC, counts, log_if_denied=False)
    mutations = mutation_quota(ctx, strict_since_version=6)
    results = []
    admin = ctx.services.admin
    waiting: dict[str, int] = {}  # created, waiting for leaders: name -> partitions
    kraft = ctx.services.listener_type != ListenerType.ZK_BROKER
    duplicates = [name for name, count in counts.items() if count > 1]
    if kraft:  # Kafka 4.4's ControllerApis: each duplicate name answered once, first
        results += [error_result(name, ErrorCode.INVALID_REQUEST, "Duplicate topic name.")
                    for name in java_hash_order(duplicates)]
    for topic in request.topics:
        if counts[topic.name] > 1:
            if not kraft:  # Kafka 3.9's KafkaApis: each entry
                results.append(error_result(topic.name, ErrorCode.INVALID_REQUEST,
                                            "Found multiple entries for this topic."))
            continue
        if topic.name not in creatable:
            results.append(error_result(topic.name, ErrorCode.TOPIC_AUTHORIZATION_FAILED, "Authorization failed."))
            continue
        try:
            partitions, replication, configs = check(ctx, topic)
            asked = {a.partition_index: list(a.broker_ids) for a in topic.assignments} if topic.assignments else None
            assignment = admin.assign_replicas(ctx.services, partitions, replication, asked)
        except AdminError as e:
            results.append(error_result(topic.name, e.code, str(e)))
            continue
        if not record_mutations(mutations, partitions):
            results.append(error_result(topic.name, ErrorCode.THROTTLING_QUOTA_EXCEEDED,
                                        THROTTLING_QUOTA_EXCEEDED_MESSAGE))
            continue
        topic_id = None
        if not request.validate_only:
            try:
                topic_id = await admin.create_topic(ctx.services, topic.name, assignment, configs)
            except AdminError as e:
                results.append(error_result(topic.name, e.code, str(e)))
                continue
            waiting[topic.name] = partitions
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
        # Until every new partition has a leader, or timeout_ms; the topics still without one
        # answer REQUEST_TIMED_OUT.
        leaderless = await admin.wait_for_leaders(waiting, request.timeout_ms)
        for i, result in enumerate(results):
            if result.name in leaderless:
                results[i] = error_result(result.name, ErrorCode.REQUEST_TIMED_OUT, None)
    return CreateTopicsResponse(throttle_time_ms=0, topics=results)
