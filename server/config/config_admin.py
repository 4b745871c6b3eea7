"""AlterConfigs and IncrementalAlterConfigs on every resource type, as Kafka's ConfigAdminManager
preprocesses them (repeated resources or keys, null values, unknown types) and hands each on: a
topic's overrides and a BROKER resource's dynamic configs to the AdminManager
(server/metadata/admin_manager.py), a BROKER_LOGGER's levels (incremental only), a CLIENT_METRICS
resource's subscription (KIP-714) and a GROUP's configs (server/config/group_configs.py) to the
AdminManager too. Where the AdminManager forwards to a controller (a KRaft cluster's broker), the
broker's checks and a BROKER_LOGGER's levels are answered here and the other resources go to the
controller in one request, whose answers take their places (KafkaApis.handleIncrementalAlterConfigsRequest)."""

from __future__ import annotations

from collections import Counter

from ...wire.errors import ErrorCode
from ..security.authorizer import ALTER_CONFIGS
from .broker_loggers import alter_loggers
from .config_resources import ConfigApiError, OpType, ResourceType, check_authorized, invalid_request
from .dynamic_broker_config import check_broker_resource, incremental_broker_configs


async def alter_configs(ctx, request, response_type, incremental: bool):
    """The response (of `response_type`) to an AlterConfigs or IncrementalAlterConfigs request:
    each resource's error code and message, in the request's order."""
    counts = Counter((r.resource_type, r.resource_name) for r in request.resources)
    if ctx.services.admin.forwards_to_controller:
        return await _forward(ctx, request, response_type, incremental, counts)
    responses = []
    for resource in request.resources:
        code, message = ErrorCode.NONE, None
        try:
            if counts[(resource.resource_type, resource.resource_name)] > 1:
                raise invalid_request("Each resource must appear at most once.")
            await _alter(ctx, resource, request.validate_only, incremental)
        except ConfigApiError as error:
            code, message = error.code, error.message
        responses.append(response_type.AlterConfigsResourceResponse(
            error_code=code, error_message=message, resource_type=resource.resource_type,
            resource_name=resource.resource_name))
    return response_type(throttle_time_ms=0, responses=responses)


async def _forward(ctx, request, response_type, incremental: bool, counts: Counter) -> object:
    """ConfigAdminManager.preprocess on each resource, then the rest to the controller."""
    answered: dict[int, tuple[ErrorCode, str | None]] = {}  # by index in the request
    for index, resource in enumerate(request.resources):
        try:
            if counts[(resource.resource_type, resource.resource_name)] > 1:
                raise invalid_request("Each resource must appear at most once.")
            _check_configs(resource, incremental)
            kind, name = resource.resource_type, resource.resource_name
            if kind == ResourceType.BROKER_LOGGER and incremental:
                check_authorized(ctx, ALTER_CONFIGS, kind, name)
                alter_loggers(name, ctx.services.node_id, resource.configs, request.validate_only)
                answered[index] = ErrorCode.NONE, None
            elif kind == ResourceType.BROKER:
                check_authorized(ctx, ALTER_CONFIGS, kind, name)
                check_broker_resource(name, ctx.services.node_id)
            elif kind not in (ResourceType.TOPIC, ResourceType.CLIENT_METRICS, ResourceType.GROUP):
                raise invalid_request(f"Unknown resource type {kind}")
        except ConfigApiError as error:
            answered[index] = error.code, error.message
    forwarded = [r for i, r in enumerate(request.resources) if i not in answered]
    results = iter(())
    if forwarded:
        remaining = type(request)(resources=forwarded, validate_only=request.validate_only)
        response = await ctx.services.admin.forward(ctx, remaining)
        results = iter(response.responses)
    responses = []
    for index, resource in enumerate(request.resources):
        if index in answered:
            code, message = answered[index]
        else:  # the controller answers its resources in the order it was sent them
            result = next(results, None)
            code, message = ((ErrorCode.UNKNOWN_SERVER_ERROR, None) if result is None
                             else (result.error_code, result.error_message))
        responses.append(response_type.AlterConfigsResourceResponse(
            error_code=code, error_message=message, resource_type=resource.resource_type,
            resource_name=resource.resource_name))
    return response_type(throttle_time_ms=0, responses=responses)


def _check_configs(resource, incremental: bool) -> None:
    names = [c.name for c in resource.configs]
    if len(set(names)) != len(names):
        raise invalid_request("Error due to duplicate config keys")
    nulls = [c.name for c in resource.configs
             if c.value is None and not (incremental and c.config_operation == OpType.DELETE)]
    if nulls:
        raise invalid_request("Null value not supported for : " + ", ".join(nulls))


async def _alter(ctx, resource, validate_only: bool, incremental: bool) -> None:
    services = ctx.services
    _check_configs(resource, incremental)
    kind, name = resource.resource_type, resource.resource_name
    if kind == ResourceType.TOPIC:
        check_authorized(ctx, ALTER_CONFIGS, kind, name)
        await services.admin.alter_topic_configs(services, name, resource.configs, incremental, validate_only)
    elif kind == ResourceType.BROKER:
        check_broker_resource(name, services.node_id)
        check_authorized(ctx, ALTER_CONFIGS, kind, name)
        configs = (incremental_broker_configs(services.config.dynamic_configs(per_broker=name != ""), resource.configs)
                   if incremental else {c.name: c.value for c in resource.configs})
        await services.admin.alter_broker_configs(services, name, configs, validate_only)
    elif kind == ResourceType.BROKER_LOGGER and incremental:
        check_authorized(ctx, ALTER_CONFIGS, kind, name)
        alter_loggers(name, services.node_id, resource.configs, validate_only)
    elif kind == ResourceType.CLIENT_METRICS:
        check_authorized(ctx, ALTER_CONFIGS, kind, name)
        await services.admin.alter_client_metrics(services, name, resource.configs, incremental, validate_only)
    elif kind == ResourceType.GROUP:
        check_authorized(ctx, ALTER_CONFIGS, kind, name)
        await services.admin.alter_group_configs(services, name, resource.configs, incremental, validate_only)
    else:
        # Legacy AlterConfigs never took BROKER_LOGGER: it lands here too.
        raise invalid_request(f"Unknown resource type {kind}")
