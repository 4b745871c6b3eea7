"""What the broker tells KIP-848 consumer groups: their group.consumer.* settings, whether the
protocol is enabled (group.coordinator.rebalance.protocols), and the cluster's topics."""

from __future__ import annotations

from ...coordinator.consumer_group import ConsumerGroupConfig, TopicInfo, TopicsImage

# group.consumer.assignors takes Kafka's class names or the assignors' names.
_ASSIGNOR_CLASSES = {
    "org.apache.kafka.coordinator.group.assignor.UniformAssignor": "uniform",
    "org.apache.kafka.coordinator.group.assignor.RangeAssignor": "range",
}


class ConsumerGroupConfigError(ValueError):
    def __init__(self, name: str, message: str) -> None:
        super().__init__(message)
        self.name = name


def consumer_protocol_enabled(get) -> bool:
    return "consumer" in get("group.coordinator.rebalance.protocols")


def consumer_group_config(get) -> ConsumerGroupConfig:
    """group.consumer.* read from a broker config's `get`, checked as Kafka's GroupCoordinatorConfig
    checks them (ConsumerGroupConfigError names the config at fault)."""
    if "classic" not in get("group.coordinator.rebalance.protocols"):
        raise ConsumerGroupConfigError("group.coordinator.rebalance.protocols",
                                       "Disabling the 'classic' protocol is not supported.")
    assignors = []
    for name in get("group.consumer.assignors"):
        assignor = _ASSIGNOR_CLASSES.get(name, name)
        if assignor not in ("uniform", "range"):
            raise ConsumerGroupConfigError("group.consumer.assignors", f"Class {name} could not be found.")
        assignors.append(assignor)
    if not assignors:
        raise ConsumerGroupConfigError("group.consumer.assignors", "group.consumer.assignors must contain at least "
                                       "one assignor")
    prefix = "group.consumer."
    for name, relation, other in (
            ("max.heartbeat.interval.ms", ">=", "min.heartbeat.interval.ms"),
            ("heartbeat.interval.ms", ">=", "min.heartbeat.interval.ms"),
            ("heartbeat.interval.ms", "<=", "max.heartbeat.interval.ms"),
            ("max.session.timeout.ms", ">=", "min.session.timeout.ms"),
            ("session.timeout.ms", ">=", "min.session.timeout.ms"),
            ("session.timeout.ms", "<=", "max.session.timeout.ms"),
            ("heartbeat.interval.ms", "<", "session.timeout.ms"),
            ("max.assignment.interval.ms", ">=", "min.assignment.interval.ms"),
            ("assignment.interval.ms", ">=", "min.assignment.interval.ms"),
            ("assignment.interval.ms", "<=", "max.assignment.interval.ms")):
        value, bound = get(prefix + name), get(prefix + other)
        if not {">=": value >= bound, "<=": value <= bound, "<": value < bound}[relation]:
            words = {">=": "greater than or equal to", "<=": "less than or equal to", "<": "less than"}[relation]
            raise ConsumerGroupConfigError(prefix + name, f"{prefix}{name} must be {words} {prefix}{other}")
    session, heartbeat = get(prefix + "session.timeout.ms"), get(prefix + "heartbeat.interval.ms")
    return ConsumerGroupConfig(session_timeout_ms=session, heartbeat_interval_ms=heartbeat,
                               assignment_interval_ms=get(prefix + "assignment.interval.ms"), max_size=get(prefix + "max.size"), assignors=tuple(dict.fromkeys(assignors)))


def topics_image(metadata) -> TopicsImage:
    return TopicsImage(TopicInfo(t.name, t.topic_id, t.num_partitions, t.is_internal)
                       for t in metadata.topics.values())
