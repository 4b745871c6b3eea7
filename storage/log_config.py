"""Topic-level configs (Kafka 4.4's LogConfig): Kafka's names, types, defaults and validators.

Each dataclass field carries its Kafka name, type and validator in its metadata, so the defaults
and `from_props` come from one table.
"""

from __future__ import annotations

import dataclasses
import random
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from .errors import InvalidConfigurationException

LONG_MAX = 2**63 - 1
INT_MAX = 2**31 - 1
_LONG_MIN = -(2**63)
_INT_MIN = -(2**31)

CLEANUP_POLICY_COMPACT = "compact"
CLEANUP_POLICY_DELETE = "delete"
CREATE_TIME = "CreateTime"
LOG_APPEND_TIME = "LogAppendTime"
COMPRESSION_TYPES = ("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer")

_INTEGER = re.compile(r"[+-]?\d+")
_LIST_SEPARATOR = re.compile(r"\s*,\s*")
_THROTTLED_REPLICA = re.compile(r"([0-9]+:[0-9]+)?")

Validator = Callable[[Any], "str | None"]  # returns why the value is invalid, or None


def _at_least(minimum: int) -> Validator:
    return lambda v: None if v >= minimum else f"Value must be at least {minimum}"


def _between(low: float, high: float) -> Validator:
    return lambda v: None if low <= v <= high else f"Value must be no less than {low} and no more than {high}"


def _one_of(*allowed: str) -> Validator:
    return lambda v: None if v in allowed else f"String must be one of: {', '.join(allowed)}"


def _each_one_of(*allowed: str) -> Validator:
    def check(values: tuple[str, ...]) -> str | None:
        bad = [v for v in values if v not in allowed]
        return f"String must be one of: {', '.join(allowed)}" if bad else None
    return check


def _gzip_level(level: int) -> str | None:
    return None if level == -1 or 1 <= level <= 9 else "Valid values are between 1 and 9 or -1"


def _throttled_replicas(values: tuple[str, ...]) -> str | None:
    if "".join(values).strip() == "*" or all(_THROTTLED_REPLICA.fullmatch(v.strip()) for v in values):
        return None
    return "Must be the wildcard '*' or a list of [partitionId]:[brokerId] pairs"


def _parse_int(text: str, low: int, high: int) -> int:
    if not _INTEGER.fullmatch(text):
        raise ValueError
    value = int(text)
    if not low <= value <= high:
        raise ValueError
    return value


def _parse_bool(text: str) -> bool:
    lowered = text.lower()
    if lowered not in ("true", "false"):
        raise ValueError
    return lowered == "true"


def _parse_double(text: str) -> float:
    if "_" in text:
        raise ValueError
    return float(text)


def _parse_list(text: str) -> tuple[str, ...]:
    return tuple(_LIST_SEPARATOR.split(text)) if text else ()


# Kafka's ConfigDef types: how each parses from a property string, and the name it reports.
_TYPES: dict[str, Callable[[str], Any]] = {
    "INT": lambda t: _parse_int(t, _INT_MIN, INT_MAX),
    "LONG": lambda t: _parse_int(t, _LONG_MIN, LONG_MAX),
    "DOUBLE": _parse_double,
    "BOOLEAN": _parse_bool,
    "STRING": lambda t: t,
    "LIST": _parse_list,
}


def _config(name: str, kind: str, default: Any, validator: Validator | None = None) -> Any:
    return field(default=default, metadata={"name": name, "type": kind, "validator": validator})


@dataclass(frozen=True)
class LogConfig:
    cleanup_policy: tuple[str, ...] = _config(
        "cleanup.policy", "LIST", (CLEANUP_POLICY_DELETE,), _each_one_of(CLEANUP_POLICY_COMPACT, CLEANUP_POLICY_DELETE))
    compression_gzip_level: int = _config("compression.gzip.level", "INT", -1, _gzip_level)
    compression_lz4_level: int = _config("compression.lz4.level", "INT", 9, _between(1, 17))
    compression_type: str = _config("compression.type", "STRING", "producer", _one_of(*COMPRESSION_TYPES))
    compression_zstd_level: int = _config("compression.zstd.level", "INT", 3, _between(-131072, 22))
    delete_retention_ms: int = _config("delete.retention.ms", "LONG", 86400000, _at_least(0))
    # Share groups' dead-letter queues (KIP-1191): Samsa has no share groups; the config is kept.
    errors_deadletterqueue_group_enable: bool = _config("errors.deadletterqueue.group.enable", "BOOLEAN", False)
    file_delete_delay_ms: int = _config("file.delete.delay.ms", "LONG", 60000, _at_least(0))
    flush_messages: int = _config("flush.messages", "LONG", LONG_MAX, _at_least(1))
    flush_ms: int = _config("flush.ms", "LONG", LONG_MAX, _at_least(0))
    follower_replication_throttled_replicas: tuple[str, ...] = _config(
        "follower.replication.throttled.replicas", "LIST", (), _throttled_replicas)
    index_interval_bytes: int = _config("index.interval.bytes", "INT", 4096, _at_least(0))
    leader_replication_throttled_replicas: tuple[str, ...] = _config(
        "leader.replication.throttled.replicas", "LIST", (), _throttled_replicas)
    local_retention_bytes: int = _config("local.retention.bytes", "LONG", -2, _at_least(-2))
    local_retention_ms: int = _config("local.retention.ms", "LONG", -2, _at_least(-2))
    max_compaction_lag_ms: int = _config("max.compaction.lag.ms", "LONG", LONG_MAX, _at_least(1))
    max_decompressed_message_bytes: int = _config(
        "max.decompressed.message.bytes", "INT", INT_MAX - 8, _between(1, INT_MAX - 8))
    max_message_bytes: int = _config("max.message.bytes", "INT", 1048588, _at_least(0))
    # Kafka 4.0's default (KIP-937): a record more than an hour in the future is refused.
    message_timestamp_after_max_ms: int = _config(
        "message.timestamp.after.max.ms", "LONG", 3600000, _at_least(0))
    message_timestamp_before_max_ms: int = _config(
        "message.timestamp.before.max.ms", "LONG", LONG_MAX, _at_least(0))
    message_timestamp_type: str = _config(
        "message.timestamp.type", "STRING", CREATE_TIME, _one_of(CREATE_TIME, LOG_APPEND_TIME))
    min_cleanable_dirty_ratio: float = _config("min.cleanable.dirty.ratio", "DOUBLE", 0.5, _between(0, 1))
    min_compaction_lag_ms: int = _config("min.compaction.lag.ms", "LONG", 0, _at_least(0))
    min_insync_replicas: int = _config("min.insync.replicas", "INT", 1, _at_least(1))
    preallocate: bool = _config("preallocate", "BOOLEAN", False)
    remote_copy_lag_bytes: int = _config("remote.copy.lag.bytes", "LONG", -1, _at_least(-1))
    remote_copy_lag_ms: int = _config("remote.copy.lag.ms", "LONG", 0, _at_least(-1))
    remote_log_copy_disable: bool = _config("remote.log.copy.disable", "BOOLEAN", False)
    remote_log_delete_on_disable: bool = _config("remote.log.delete.on.disable", "BOOLEAN", False)
    remote_storage_enable: bool = _config("remote.storage.enable", "BOOLEAN", False)
    retention_bytes: int = _config("retention.bytes", "LONG", -1)
    retention_ms: int = _config("retention.ms", "LONG", 604800000, _at_least(-1))
    # LegacyRecord.RECORD_OVERHEAD_V0: the smallest thing a segment could hold. Kafka 4.0 refuses
    # less than 1 MiB (its own tests use internal.segment.bytes); Samsa keeps 3.x's minimum, so
    # tests roll small segments with the ordinary config.
    segment_bytes: int = _config("segment.bytes", "INT", 1073741824, _at_least(14))
    segment_index_bytes: int = _config("segment.index.bytes", "INT", 10485760, _at_least(4))
    segment_jitter_ms: int = _config("segment.jitter.ms", "LONG", 0, _at_least(0))
    segment_ms: int = _config("segment.ms", "LONG", 604800000, _at_least(1))
    unclean_leader_election_enable: bool = _config("unclean.leader.election.enable", "BOOLEAN", False)

    # Cached: every append asks (twice); a config never changes, a new one replaces it.
    @cached_property
    def compact(self) -> bool:
        return CLEANUP_POLICY_COMPACT in (p.lower() for p in self.cleanup_policy)

    @cached_property
    def delete(self) -> bool:
        return CLEANUP_POLICY_DELETE in (p.lower() for p in self.cleanup_policy)

    @property
    def max_segment_ms(self) -> int:
        """A compacted topic rolls by max.compaction.lag.ms too, so the cleaner can reach its records."""
        if self.compact and self.max_compaction_lag_ms > 0:
            return min(self.max_compaction_lag_ms, self.segment_ms)
        return self.segment_ms

    @property
    def init_file_size(self) -> int:
        return self.segment_bytes if self.preallocate else 0

    def random_segment_jitter(self) -> int:
        if self.segment_jitter_ms == 0:
            return 0
        return random.randrange(min(self.segment_jitter_ms, self.segment_ms))

    @classmethod
    def from_props(cls, props: Mapping[str, str], base: LogConfig | None = None) -> LogConfig:
        """`base` (the broker's defaults, or Kafka's) overridden by topic configs in Kafka's names."""
        changes: dict[str, Any] = {}
        for name, text in props.items():
            spec = _BY_NAME.get(name)
            if spec is None:
                raise InvalidConfigurationException(name, f"Unknown topic config name: {name}")
            changes[spec.name] = _parse(spec, name, text)
        config = dataclasses.replace(base or cls(), **changes)
        if config.min_compaction_lag_ms > config.max_compaction_lag_ms:
            raise InvalidConfigurationException(
                "min.compaction.lag.ms",
                f"conflict topic config setting min.compaction.lag.ms ({config.min_compaction_lag_ms}) > "
                f"max.compaction.lag.ms ({config.max_compaction_lag_ms})")
        return config


def _parse(spec: dataclasses.Field, name: str, text: str) -> Any:
    kind = spec.metadata["type"]
    raw = text.strip()
    try:
        value = _TYPES[kind](raw)
    except ValueError:
        raise InvalidConfigurationException(
            name, f"Invalid value {text} for configuration {name}: Not a valid {kind} value") from None
    validator = spec.metadata["validator"]
    reason = validator(value) if validator else None
    if reason:
        raise InvalidConfigurationException(name, f"Invalid value {text} for configuration {name}: {reason}")
    return value


_BY_NAME: dict[str, dataclasses.Field] = {f.metadata["name"]: f for f in dataclasses.fields(LogConfig)}
