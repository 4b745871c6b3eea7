"""AlterConfigs (key 33): replace a topic's config overrides."""

from __future__ import annotations

from ...wire.protocol import ApiKey, response_class
from ..topic_configs import apply_topic_configs
from . import handler

AlterConfigsResponse = response_class(ApiKey.ALTER_CONFIGS)
Result = AlterConfigsResponse.AlterConfigsResourceResponse


@handler(ApiKey.ALTER_CONFIGS)
async def handle(ctx, request):
    responses = []
    for r in request.resources:
        configs = {c.name: c.value for c in r.configs}
        code, message = apply_topic_configs(ctx.broker, r.resource_type, r.resource_name, configs, request.validate_only)
        responses.append(Result(error_code=code, error_message=message, resource_type=r.resource_type,
                                resource_name=r.resource_name))
    return AlterConfigsResponse(throttle_time_ms=0, responses=responses)
