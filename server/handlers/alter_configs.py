"""AlterConfigs (key 33): replace the whole config set of a topic or a BROKER resource."""

from __future__ import annotations

from ...wire.protocol import ApiKey, response_class
from ..config_admin import alter_configs
from . import handler


@handler(ApiKey.ALTER_CONFIGS, 0, 2)
async def handle(ctx, request):
    return alter_configs(ctx, request, response_class(ApiKey.ALTER_CONFIGS), incremental=False)
