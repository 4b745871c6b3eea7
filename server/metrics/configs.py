"""Samsa's own broker configs for its metrics endpoint: Kafka has none (it exposes JMX, which a
Prometheus JMX exporter turns into what this endpoint serves directly). Declared as Kafka declares
its configs, so that server.properties, --override and DescribeConfigs treat them like the others."""

from ..config.broker_config_defs import BrokerConfigDef

METRICS_CONFIGS = {
    "metrics.port": BrokerConfigDef(
        name="metrics.port", type="int", default=0, valid_values="[0,...,65535]", importance="low",
        update_mode="read-only", kafka_version=None,
        doc="Samsa's own: the TCP port of the Prometheus endpoint (/metrics, /healthz, /readyz). "
            "0, the default, serves no endpoint."),
    "metrics.host": BrokerConfigDef(
        name="metrics.host", type="string", default="127.0.0.1", valid_values="", importance="low",
        update_mode="read-only", kafka_version=None,
        doc="Samsa's own: the address the Prometheus endpoint binds (metrics.port); 0.0.0.0 for every "
            "interface."),
}
