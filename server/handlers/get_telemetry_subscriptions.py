"""GetTelemetrySubscriptions (key 71), v0: a client's telemetry subscription (KIP-714): its client
instance id (a new one for the zero id), subscription id, requested metrics, push interval,
accepted compression types and telemetry.max.bytes. Follows KafkaApis.handleGetTelemetrySubscriptionsRequest
and ClientMetricsManager.processGetTelemetrySubscriptionRequest (server/metrics/client_telemetry.py, and
coordinator/client_metrics.py for the rules). No authorization, as in Kafka.
Served as a KRaft-mode broker serves it: a ZooKeeper-mode Kafka 3.9 broker neither lists nor
serves it, nor does a Samsa broker in a ZooKeeper cluster.
Deviations: none known.
"""

from __future__ import annotations

from ...wire.protocol import ApiKey
from . import handler


@handler(ApiKey.GET_TELEMETRY_SUBSCRIPTIONS, 0, 0, kraft_only=True)
async def handle(ctx, request):
    return ctx.services.client_telemetry.get_subscriptions(ctx, request)
