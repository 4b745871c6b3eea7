"""DescribeConfigs (key 32), v0-4: the configs of a topic, of a BROKER resource (this broker's id, or
the empty name for the cluster-wide dynamic defaults), the levels of a BROKER_LOGGER and the configs
of a CLIENT_METRICS resource as Kafka 4.4 describes them (server/config/client_metrics_configs.py), with
their sources, synonyms (v1+) and documentation (v3+). Follows KafkaApis.handleDescribeConfigsRequest and
ConfigHelper.describeConfigs: DESCRIBE_CONFIGS on the resource.
GROUP resources (group configs) as Kafka 4.4 describes them (server/config/group_configs.py).
Deviations: v0 is served as in Kafka 3.9 (Kafka 4.0 removed it, KIP-896).
A topic is the MetadataCache's, its overrides read where the AdminManager keeps them (in a
ZooKeeper cluster from /config/topics/<t> for each request, as Kafka 3.9's ZkConfigRepository does;
a CLIENT_METRICS resource is INVALID_REQUEST there, as in Kafka 3.9's ZooKeeper mode).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ...wire.errors import ErrorCode
from ...wire.protocol import ApiKey, response_class
from ..config.broker_loggers import describe_loggers
from ..config.client_metrics_configs import describe_client_metrics
from ..config.group_configs import describe_group_configs
from ..config.kafka_config import ConfigSource
from ..security.authorizer import DESCRIBE_CONFIGS
from ..config.config_resources import ConfigApiError, ResourceType, check_authorized, invalid_request, parse_node_id
from . import ListenerType, handler

if TYPE_CHECKING:
    from ..context import BrokerServices

DescribeConfigsResponse = response_class(ApiKey.DESCRIBE_CONFIGS)
Result = DescribeConfigsResponse.DescribeConfigsResult
Entry = DescribeConfigsResponse.DescribeConfigsResourceResult
Synonym = DescribeConfigsResponse.DescribeConfigsSynonym


def described(services: BrokerServices, resource):
    kind, name, keys = resource.resource_type, resource.resource_name, resource.configuration_keys
    if kind == ResourceType.TOPIC:
        topic = services.metadata_cache.topics.get(name)
        if topic is None:  # Kafka 4.4's ConfigHelper gives no message, Kafka 3.9's (ZooKeeper mode) one
            raise ConfigApiError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                                 f"Topic {name} does not exist." if services.listener_type == ListenerType.ZK_BROKER
                                 else "")
        return services.config.describe_topic_configs(topic.configs, keys)
    if kind == ResourceType.BROKER:
        if not name:
            return services.config.describe_dynamic_defaults(keys)
        if parse_node_id(name, "Broker id") != services.node_id:
            raise invalid_request(
                f"Unexpected broker id, expected {services.node_id} or empty string, but received {name}")
        return services.config.describe(keys)
    if kind == ResourceType.BROKER_LOGGER:
        return describe_loggers(name, services.node_id, keys)
    if kind == ResourceType.CLIENT_METRICS:
        return describe_client_metrics(services, name, keys)
    if kind == ResourceType.GROUP:
        return describe_group_configs(services, name, keys)
    if services.listener_type == ListenerType.ZK_BROKER:
        raise invalid_request(f"Unsupported resource type {kind}")
    raise invalid_request(ErrorCode.INVALID_REQUEST.message)  # Kafka 4.4: the error's own message


def entries(ctx, request, resource):
    include_synonyms = ctx.api_version >= 1 and request.include_synonyms
    include_docs = ctx.api_version >= 3 and request.include_documentation
    return [
        Entry(name=e.name, value=e.value, read_only=e.read_only,
              is_default=ctx.api_version == 0 and e.source == ConfigSource.DEFAULT_CONFIG,
              config_source=e.source, is_sensitive=e.is_sensitive,
              synonyms=[Synonym(name=s.name, value=s.value, source=s.source) for s in e.synonyms]
              if include_synonyms else [],
              config_type=e.config_type,
              documentation=e.documentation if include_docs or resource.resource_type == ResourceType.BROKER_LOGGER
              else None)
        for e in described(ctx.services, resource)
    ]


@handler(ApiKey.DESCRIBE_CONFIGS, 0, 4)
async def handle(ctx, request):
    results = []
    for resource in request.resources:
        code, configs = ErrorCode.NONE, []
        message: str | None = ""  # Kafka's on success
        try:
            check_authorized(ctx, DESCRIBE_CONFIGS, resource.resource_type, resource.resource_name)
            if resource.resource_type == ResourceType.TOPIC:
                await ctx.services.admin.read_topic_configs(ctx.services, resource.resource_name)
            configs = entries(ctx, request, resource)
        except ConfigApiError as error:
            code, message = error.code, error.message
        results.append(Result(error_code=code, error_message=message, resource_type=resource.resource_type,
                              resource_name=resource.resource_name, configs=configs))
    return DescribeConfigsResponse(throttle_time_ms=0, results=results)
