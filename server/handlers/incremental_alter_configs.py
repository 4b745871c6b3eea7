"""IncrementalAlterConfigs (key 44): set, delete, append to or subtract from the configs of a topic
or a BROKER resource, or set a BROKER_LOGGER's levels."""

from __future__ import annotations

from ...wire.protocol import ApiKey, response_class
from ..config_admin import alter_configs
from . import handler


@handler(ApiKey.INCREMENTAL_ALTER_CONFIGS, 0, 1)
async def handle(ctx, request):
    return alter_configs(ctx, request, response_class(ApiKey.INCREMENTAL_ALTER_CONFIGS), incremental=True)
