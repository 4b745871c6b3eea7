"""PushTelemetry (key 72), v0: a client's metrics (KIP-714), OTLP MetricsData compressed as the
client chose, checked against its subscription (instance id, subscription id, push interval,
terminating, compression type, telemetry.max.bytes) and kept for the Prometheus collector. Follows
KafkaApis.handlePushTelemetryRequest and ClientMetricsManager.processPushTelemetryRequest
(server/metrics/client_telemetry.py, coordinator/client_metrics.py). No authorization, as in Kafka.
Served as a KRaft-mode broker serves it: not in a ZooKeeper cluster (Kafka 3.9's ZooKeeper mode
has no client telemetry).
Deviations: Kafka hands the payload to a ClientTelemetryReceiver plugin; Samsa's receiver is built
in (server/metrics/client_telemetry.py), so a push is accepted even where Kafka, without a plugin, would
not advertise the API at all.
"""

from __future__ import annotations

from ...wire.protocol import ApiKey
from . import handler


@handler(ApiKey.PUSH_TELEMETRY, 0, 0, kraft_only=True)
async def handle(ctx, request):
    return ctx.services.client_telemetry.push(ctx, request)
