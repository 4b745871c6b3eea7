"""IncrementalAlterConfigs (key 44): set, delete, append to or subtract from topic configs."""

from __future__ import annotations

from ...wire.protocol import ApiKey, response_class
from ..topic_configs import TOPIC, apply_topic_configs, incremental
from . import handler

IncrementalAlterConfigsResponse = response_class(ApiKey.INCREMENTAL_ALTER_CONFIGS)
Result = IncrementalAlterConfigsResponse.AlterConfigsResourceResponse


@handler(ApiKey.INCREMENTAL_ALTER_CONFIGS)
async def handle(ctx, request):
    responses = []
    for r in request.resources:
        topic = ctx.broker.metadata.topics.get(r.resource_name) if r.resource_type == TOPIC else None
        overrides = topic.configs if topic else {}

        def effective(name: str, overrides=overrides) -> str | None:
            entries = ctx.broker.config.describe_topic_configs(overrides, [name])
            return entries[0].value if entries else None

        configs, error = incremental(overrides, r.configs, effective)
        code, message = apply_topic_configs(ctx.broker, r.resource_type, r.resource_name, configs,
                                            request.validate_only, error)
        responses.append(Result(error_code=code, error_message=message, resource_type=r.resource_type,
                                resource_name=r.resource_name))
    return IncrementalAlterConfigsResponse(throttle_time_ms=0, responses=responses)
