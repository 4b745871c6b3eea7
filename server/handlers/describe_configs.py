"""DescribeConfigs (key 32): topic and broker configs with their sources and synonyms."""

from __future__ import annotations

from ...wire.errors import ErrorCode
from ...wire.protocol import ApiKey, response_class
from ..config import ConfigSource
from . import handler

DescribeConfigsResponse = response_class(ApiKey.DESCRIBE_CONFIGS)
Result = DescribeConfigsResponse.DescribeConfigsResult
Entry = DescribeConfigsResponse.DescribeConfigsResourceResult
Synonym = DescribeConfigsResponse.DescribeConfigsSynonym
TOPIC, BROKER, BROKER_LOGGER = 2, 4, 8


def entries(ctx, request, resource):
    broker = ctx.broker
    if resource.resource_type == TOPIC:
        topic = broker.metadata.topics.get(resource.resource_name)
        if topic is None:
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Topic {resource.resource_name} does not exist.", []
        found = broker.config.describe_topic_configs(topic.configs, resource.configuration_keys)
    elif resource.resource_type == BROKER:
        if resource.resource_name not in ("", str(broker.node_id)):
            return ErrorCode.INVALID_REQUEST, f"Unexpected broker id, expected {broker.node_id} or empty string, but received {resource.resource_name}", []
        found = broker.config.describe(resource.configuration_keys)
    elif resource.resource_type == BROKER_LOGGER:
        return ErrorCode.NONE, None, []
    else:
        return ErrorCode.INVALID_REQUEST, f"Unsupported resource type {resource.resource_type}", []
    include_synonyms = ctx.api_version >= 1 and request.include_synonyms
    include_docs = ctx.api_version >= 3 and request.include_documentation
    configs = []
    for e in found:
        configs.append(Entry(
            name=e.name, value=e.value, read_only=e.read_only,
            is_default=ctx.api_version == 0 and e.source == ConfigSource.DEFAULT_CONFIG,
            config_source=e.source, is_sensitive=e.is_sensitive,
            synonyms=[Synonym(name=s.name, value=s.value, source=s.source) for s in e.synonyms] if include_synonyms else [],
            config_type=e.config_type, documentation=e.documentation if include_docs else None))
    return ErrorCode.NONE, None, configs


@handler(ApiKey.DESCRIBE_CONFIGS)
async def handle(ctx, request):
    results = []
    for resource in request.resources:
        code, message, configs = entries(ctx, request, resource)
        results.append(Result(error_code=code, error_message=message, resource_type=resource.resource_type,
                              resource_name=resource.resource_name, configs=configs))
    return DescribeConfigsResponse(throttle_time_ms=0, results=results)
