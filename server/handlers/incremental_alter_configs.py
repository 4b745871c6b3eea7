"""IncrementalAlterConfigs (key 44), v0-1: set, delete, append to or subtract from the configs of a
topic or a BROKER resource, or set a BROKER_LOGGER's levels. Follows ConfigAdminManager.preprocess
(server/config/config_admin.py) and ConfigurationControlManager.incrementalAlterConfigs: ALTER_CONFIGS on the
resource, validate_only, applied at once and kept in the metadata image.
CLIENT_METRICS and GROUP resources (server/config/client_metrics_configs.py, group_configs.py) as Kafka 4.4.
Deviations: alter.config.policy.class.name
is accepted but never applied;
adding or removing a listener is refused (Kafka opens or closes it).
"""

from __future__ import annotations

from ...wire.protocol import ApiKey, response_class
from ..config.config_admin import alter_configs
from . import handler


@handler(ApiKey.INCREMENTAL_ALTER_CONFIGS, 0, 1)
async def handle(ctx, request):
    return await alter_configs(ctx, request, response_class(ApiKey.INCREMENTAL_ALTER_CONFIGS), incremental=True)
