"""Group configs (Kafka's GroupConfig and GroupConfigManager): per-group overrides of the broker's
group.consumer.*, group.share.* and group.streams.* settings, set on the GROUP config resource
(type 32) with IncrementalAlterConfigs or AlterConfigs.

This module holds what the coordinators and the share fetch path read: the definitions (names,
types, defaults, the broker config each overrides), and `GroupConfigManager`, which keeps the
overrides of every group and answers a group's effective values, an override evaluated as Kafka
evaluates it (clamped to the broker's current min/max) or else the broker's value. Checking an
override before it is stored (Kafka's GroupConfig.validate, with its messages) and describing the
resource are the config APIs' (server/config/group_configs.py).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

log = logging.getLogger("samsa.coordinator.group_config")


@dataclass(frozen=True)
class GroupConfigDef:
    name: str
    type: str  # "int", "long", "boolean", "string", "list" (ConfigDef's types)
    default: str | None  # as a string; None: none (the broker's synonym gives the value)
    doc: str
    synonym: str | None = None  # the broker config it overrides (GroupConfig.ALL_GROUP_CONFIG_SYNONYMS)
    at_least: int | None = None  # ConfigDef.Range.atLeast
    one_of: tuple[str, ...] = ()  # ConfigDef.ValidString.in
    internal: bool = False  # ConfigDef.defineInternal: described only when set


def _d(name: str, type_: str, default: str | None, doc: str, synonym: str | None = None, **kw: Any) -> GroupConfigDef:
    return GroupConfigDef(name, type_, default, doc, synonym, **kw)


SHARE_AUTO_OFFSET_RESET_DOC = (
    "The strategy to initialize the share-partition start offset. <ul><li>earliest: automatically reset the offset "
    "to the earliest offset</li><li>latest: automatically reset the offset to the latest offset</li><li>"
    "by_duration:&lt;duration&gt;: automatically reset the offset to a configured duration from the current "
    "timestamp. &lt;duration&gt; must be specified in ISO8601 format (PnDTnHnMn.nS). Negative duration is not "
    "allowed.</li><li>anything else: throw exception to the share consumer.</li></ul>")
SHARE_ISOLATION_LEVEL_DOC = (
    "Controls how to read records written transactionally. If set to \"read_committed\", the share group will "
    "only deliver transactional records which have been committed. If set to \"read_uncommitted\", the share group "
    "will return all messages, even transactional messages which have been aborted. Non-transactional records "
    "will be returned unconditionally in either mode.")

# Kafka 4.4's GroupConfig.CONFIG_DEF, in the order Kafka lists them in DescribeConfigs (its HashMap's).
GROUP_CONFIGS: dict[str, GroupConfigDef] = {d.name: d for d in (
    _d("consumer.session.timeout.ms", "int", "45000",
       "The timeout to detect client failures when using the consumer group protocol.",
       "group.consumer.session.timeout.ms", at_least=1),
    _d("streams.assignor.name", "string", None,
       "The task assignor to use for this streams group, selected by short name from the assignors registered via "
       "the broker configuration group.streams.assignors. When unset, the group defaults to the first assignor "
       "configured in the broker's group.streams.assignors setting. Changing the assignor does not trigger a "
       "rebalance for the group; the new assignor takes effect on the next rebalance.", "group.streams.assignors"),
    _d("consumer.assignment.interval.ms", "int", "1000",
       "The interval between assignment updates for a consumer group.", "group.consumer.assignment.interval.ms",
       at_least=0),
    _d("errors.deadletterqueue.copy.record.enable", "boolean", "false",
       "When writing onto the dead-letter queue topic, whether to copy the original record onto the DLQ topic, or "
       "just write a record containing the context information headers."),
    _d("share.auto.offset.reset", "string", "latest", SHARE_AUTO_OFFSET_RESET_DOC),
    _d("streams.rack.aware.assignment.tags", "list", "",
       "List of client tag keys used to distribute standby replicas across Kafka Streams instances. When "
       "configured, and the used broker-side assignor supports it, it will make a best-effort to distribute "
       "standby tasks over each client tag dimension.", "group.streams.rack.aware.assignment.tags"),
    _d("share.renew.acknowledge.enable", "boolean", "true",
       "Whether the renew acknowledge type is enabled for the share group."),
    _d("streams.initial.rebalance.delay.ms", "int", "3000",
       "The amount of time the group coordinator will wait for more streams clients to join a new group before "
       "performing the first rebalance. A longer delay means potentially fewer rebalances.",
       "group.streams.initial.rebalance.delay.ms", at_least=0),
    _d("share.session.timeout.ms", "int", "45000",
       "The timeout to detect client failures when using the share group protocol.",
       "group.share.session.timeout.ms", at_least=1),
    _d("streams.assignment.interval.ms", "int", "1000", "The interval between assignment updates for a streams "
       "group.", "group.streams.assignment.interval.ms", at_least=0),
    _d("share.heartbeat.interval.ms", "int", "5000", "The heartbeat interval given to the members of a share group.",
       "group.share.heartbeat.interval.ms", at_least=1),
    _d("streams.heartbeat.interval.ms", "int", "5000", "The heartbeat interval given to the members.",
       "group.streams.heartbeat.interval.ms", at_least=1),
    _d("share.delivery.count.limit", "int", "5",
       "The maximum number of delivery attempts for a record delivered to a share group.",
       "group.share.delivery.count.limit", at_least=2),
    _d("errors.deadletterqueue.topic.name", "string", "",
       "The name of the topic to be used as the dead-letter queue (DLQ) topic for this share group. If blank (the "
       "default), the group does not have a DLQ topic."),
    _d("consumer.heartbeat.interval.ms", "int", "5000",
       "The heartbeat interval given to the members of a consumer group.", "group.consumer.heartbeat.interval.ms",
       at_least=1),
    _d("share.record.lock.duration.ms", "int", "30000",
       "The record acquisition lock duration in milliseconds for share groups.",
       "group.share.record.lock.duration.ms", at_least=1000),
    _d("share.assignment.interval.ms", "int", "1000", "The interval between assignment updates for a share group.",
       "group.share.assignment.interval.ms", at_least=0),
    _d("share.isolation.level", "string", "read_uncommitted", SHARE_ISOLATION_LEVEL_DOC,
       one_of=("read_committed", "read_uncommitted")),
    _d("streams.session.timeout.ms", "int", "45000",
       "The timeout to detect client failures when using the streams group protocol.",
       "group.streams.session.timeout.ms", at_least=1),
    _d("share.partition.max.record.locks", "int", "2000", "Share-group record lock limit per share-partition.",
       "group.share.partition.max.record.locks", at_least=100),
    _d("streams.num.standby.replicas", "int", "0", "The number of standby replicas for each task.",
       "group.streams.num.standby.replicas", at_least=0),
    # Internal (ConfigDef.defineInternal): accepted, described only when set.
    _d("consumer.assignor.offload.enable", "boolean", "true",
       "Whether to offload consumer group assignment to a group coordinator background thread.",
       "group.consumer.assignor.offload.enable", internal=True),
    _d("share.assignor.offload.enable", "boolean", "true",
       "Whether to offload share group assignment to a group coordinator background thread.",
       "group.share.assignor.offload.enable", internal=True),
    _d("streams.assignor.offload.enable", "boolean", "true",
       "Whether to offload streams group assignment to a group coordinator background thread.",
       "group.streams.assignor.offload.enable", internal=True),
    _d("streams.task.offset.interval.ms", "int", "60000",
       "The interval in which the warmup task changelog offsets on a client are updated on the broker. The offsets "
       "are sent with the next heartbeat after this time has passed.", "group.streams.task.offset.interval.ms",
       at_least=1, internal=True),
    _d("streams.num.warmup.replicas", "int", "2", "The maximum number of warmup task replicas.",
       "group.streams.num.warmup.replicas", at_least=0, internal=True),
    _d("streams.acceptable.recovery.lag", "long", "10000",
       "The maximum acceptable lag (number of offsets to catch up) for a client to be considered caught-up enough "
       "to receive an active task assignment.", "group.streams.acceptable.recovery.lag", at_least=0, internal=True),
)}

# Kafka's internal broker configs the group configs name, which its docs (and so Samsa's generated
# broker configs) leave out: their defaults (GroupCoordinatorConfig).
INTERNAL_BROKER_DEFAULTS: dict[str, Any] = {
    "group.consumer.assignor.offload.enable": True,
    "group.share.assignor.offload.enable": True,
    "group.streams.assignor.offload.enable": True,
    "group.streams.task.offset.interval.ms": 60000,
    "group.streams.min.task.offset.interval.ms": 15000,
    "group.streams.num.warmup.replicas": 2,
    "group.streams.max.warmup.replicas": 20,
    "group.streams.acceptable.recovery.lag": 10000,
    "group.share.initialize.retry.interval.ms": 30000,
}

# A group config's allowed range: the broker's current min and max (GroupConfig.validateValues), to
# which a stored override is also clamped when the broker's bounds move (GroupConfig.evaluate).
BROKER_BOUNDS: dict[str, tuple[str | None, str | None]] = {
    "consumer.heartbeat.interval.ms": ("group.consumer.min.heartbeat.interval.ms",
                                       "group.consumer.max.heartbeat.interval.ms"),
    "consumer.session.timeout.ms": ("group.consumer.min.session.timeout.ms", "group.consumer.max.session.timeout.ms"),
    "consumer.assignment.interval.ms": ("group.consumer.min.assignment.interval.ms",
                                        "group.consumer.max.assignment.interval.ms"),
    "share.heartbeat.interval.ms": ("group.share.min.heartbeat.interval.ms", "group.share.max.heartbeat.interval.ms"),
    "share.session.timeout.ms": ("group.share.min.session.timeout.ms", "group.share.max.session.timeout.ms"),
    "share.record.lock.duration.ms": ("group.share.min.record.lock.duration.ms",
                                      "group.share.max.record.lock.duration.ms"),
    "share.delivery.count.limit": ("group.share.min.delivery.count.limit", "group.share.max.delivery.count.limit"),
    "share.partition.max.record.locks": ("group.share.min.partition.max.record.locks",
                                         "group.share.max.partition.max.record.locks"),
    "share.assignment.interval.ms": ("group.share.min.assignment.interval.ms",
                                     "group.share.max.assignment.interval.ms"),
    "streams.heartbeat.interval.ms": ("group.streams.min.heartbeat.interval.ms",
                                      "group.streams.max.heartbeat.interval.ms"),
    "streams.session.timeout.ms": ("group.streams.min.session.timeout.ms", "group.streams.max.session.timeout.ms"),
    "streams.num.standby.replicas": (None, "group.streams.max.standby.replicas"),
    "streams.assignment.interval.ms": ("group.streams.min.assignment.interval.ms",
                                       "group.streams.max.assignment.interval.ms"),
    "streams.task.offset.interval.ms": ("group.streams.min.task.offset.interval.ms", None),
    "streams.num.warmup.replicas": (None, "group.streams.max.warmup.replicas"),
}

# Values without a broker synonym (Kafka's GroupConfig defaults).
SHARE_AUTO_OFFSET_RESET_DEFAULT = "latest"
SHARE_ISOLATION_LEVEL_DEFAULT = "read_uncommitted"


@dataclass(frozen=True)
class ShareGroupConfig:
    """A share group's effective settings: its group config where it has one, else the broker's
    group.share.* (Kafka's ShareGroupConfigProvider and GroupConfig's share.* getters)."""

    record_lock_duration_ms: int = 30000
    delivery_count_limit: int = 5
    isolation_level: str = SHARE_ISOLATION_LEVEL_DEFAULT  # "read_committed" or "read_uncommitted"
    auto_offset_reset: str = SHARE_AUTO_OFFSET_RESET_DEFAULT  # "earliest", "latest" or "by_duration:<ISO8601>"
    partition_max_record_locks: int = 2000
    heartbeat_interval_ms: int = 5000
    session_timeout_ms: int = 45000
    renew_acknowledge_enable: bool = True  # KIP-1222: whether RENEW acknowledgements are accepted
    assignment_interval_ms: int = 1000


BrokerConfigGetter = Callable[[str], Any]


class GroupConfigManager:
    """The overrides of every group (Kafka's GroupConfigManager), as strings already checked by the
    config APIs; `broker(name)` reads the broker's current config (dynamic configs applied)."""

    def __init__(self, broker: BrokerConfigGetter) -> None:
        self._broker = broker
        self._configs: dict[str, dict[str, str]] = {}

    def broker_value(self, name: str) -> Any:
        if name in INTERNAL_BROKER_DEFAULTS:
            try:
                return self._broker(name)
            except KeyError:
                return INTERNAL_BROKER_DEFAULTS[name]
        return self._broker(name)

    def update_group_config(self, group_id: str, configs: Mapping[str, str]) -> None:
        """The group's overrides are now `configs` (none: it has none left)."""
        if configs:
            self._configs[group_id] = dict(configs)
        else:
            self._configs.pop(group_id, None)

    def group_ids(self) -> list[str]:
        return sorted(self._configs)

    def overrides(self, group_id: str) -> Mapping[str, str]:
        return self._configs.get(group_id, {})

    def override(self, group_id: str, name: str) -> Any:
        """The group's override of `name`, parsed and clamped to the broker's bounds, or None."""
        raw = self._configs.get(group_id, {}).get(name)
        if raw is None:
            return None
        definition = GROUP_CONFIGS[name]
        value = parse_group_value(definition, raw)
        low_name, high_name = BROKER_BOUNDS.get(name, (None, None))
        if isinstance(value, int) and not isinstance(value, bool):
            low = None if low_name is None else self.broker_value(low_name)
            high = None if high_name is None else self.broker_value(high_name)
            if low is not None and value < low:
                log.warning("The group config '%s' for group '%s' has value %d which is below the broker's allowed "
                            "minimum %d. The effective value will be capped to %d.", name, group_id, value, low, low)
                value = low
            elif high is not None and value > high:
                log.warning("The group config '%s' for group '%s' has value %d which exceeds the broker's allowed "
                            "maximum %d. The effective value will be capped to %d.", name, group_id, value, high, high)
                value = high
        return value

    def value(self, group_id: str, name: str) -> Any:
        """The group's effective value of `name`: its override, else the broker's synonym, else the default."""
        value = self.override(group_id, name)
        if value is not None:
            return value
        definition = GROUP_CONFIGS[name]
        if definition.synonym is not None:
            return self.broker_value(definition.synonym)
        return None if definition.default is None else parse_group_value(definition, definition.default)

    def share_config(self, group_id: str) -> ShareGroupConfig:
        v = self.value
        return ShareGroupConfig(
            record_lock_duration_ms=v(group_id, "share.record.lock.duration.ms"),
            delivery_count_limit=v(group_id, "share.delivery.count.limit"),
            isolation_level=v(group_id, "share.isolation.level"),
            auto_offset_reset=v(group_id, "share.auto.offset.reset"),
            partition_max_record_locks=v(group_id, "share.partition.max.record.locks"),
            heartbeat_interval_ms=v(group_id, "share.heartbeat.interval.ms"),
            session_timeout_ms=v(group_id, "share.session.timeout.ms"),
            renew_acknowledge_enable=v(group_id, "share.renew.acknowledge.enable"),
            assignment_interval_ms=v(group_id, "share.assignment.interval.ms"))


def parse_group_value(definition: GroupConfigDef, raw: str) -> Any:
    """A checked override's value (the config APIs refused any that does not parse)."""
    text = raw.strip()
    if definition.type in ("int", "long"):
        return int(text)
    if definition.type == "boolean":
        return text.lower() == "true"
    if definition.type == "list":
        return tuple(item.strip() for item in text.split(",")) if text else ()
    return text
