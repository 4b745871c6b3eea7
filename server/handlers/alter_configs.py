"""AlterConfigs (key 33), v0-2: replace the whole config set of a topic or a BROKER resource.
Follows ConfigAdminManager.preprocess (server/config/config_admin.py) and ConfigurationControlManager:
ALTER_CONFIGS on the resource, validate_only, applied at once and kept in the metadata image.
CLIENT_METRICS and GROUP resources (server/config/client_metrics_configs.py, group_configs.py) as Kafka 4.4.
Deviations: alter.config.policy.class.name
is accepted but never applied;
adding or removing a listener is refused (Kafka opens or closes it).
"""

from __future__ import annotations

from ...wire.protocol import ApiKey, response_class
from ..config.config_admin import alter_configs
from . import handler


@handler(ApiKey.ALTER_CONFIGS, 0, 2)
async def handle(ctx, request):
    return await alter_configs(ctx, request, response_class(ApiKey.ALTER_CONFIGS), incremental=False)
