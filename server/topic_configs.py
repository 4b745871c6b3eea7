"""Changing a topic's config overrides (AlterConfigs replaces them, IncrementalAlterConfigs edits)."""

from __future__ import annotations

from ..storage.errors import InvalidConfigurationException
from ..storage.log_config import LogConfig
from ..wire.errors import ErrorCode
from .config import ConfigError

TOPIC, BROKER = 2, 4
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3


def apply_topic_configs(broker, resource_type: int, name: str, new_configs: dict[str, str] | None,
                        validate_only: bool, error: tuple[int, str] | None = None) -> tuple[int, str | None]:
    """Validate and (unless validate_only) store a topic's new overrides: (error code, message)."""
    if error is not None:
        return error
    if resource_type == BROKER:
        return ErrorCode.INVALID_REQUEST, "Dynamic broker configs are not supported by Samsa yet"
    if resource_type != TOPIC:
        return ErrorCode.INVALID_REQUEST, f"Unsupported resource type {resource_type}"
    if name not in broker.metadata.topics:
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Topic {name} does not exist."
    try:
        broker.config.validate_topic_configs(new_configs)
        LogConfig.from_props(new_configs, base=broker.config.log_config())
    except ConfigError as e:
        return ErrorCode.INVALID_CONFIG, str(e)
    except InvalidConfigurationException as e:
        return ErrorCode.INVALID_CONFIG, str(e.args[-1])
    if not validate_only:
        broker.replica_manager.update_topic_configs(name, new_configs)
    return ErrorCode.NONE, None


def incremental(current: dict[str, str], changes, effective) -> tuple[dict[str, str], tuple[int, str] | None]:
    """Kafka's IncrementalAlterConfigs operations on a copy of the overrides `current`.

    APPEND and SUBTRACT start from the effective value (`effective(name)`: the override, else the
    broker's or Kafka's default), as Kafka does.
    """
    result = dict(current)
    for c in changes:
        if c.config_operation == SET:
            result[c.name] = c.value
        elif c.config_operation == DELETE:
            result.pop(c.name, None)
        elif c.config_operation in (APPEND, SUBTRACT):
            if c.name not in ("cleanup.policy", "leader.replication.throttled.replicas",
                              "follower.replication.throttled.replicas"):
                return result, (ErrorCode.INVALID_CONFIG,
                                f"Config value append is not allowed for config key: {c.name}")
            base = result[c.name] if c.name in result else effective(c.name) or ""
            items = [x for x in base.split(",") if x]
            values = [x.strip() for x in (c.value or "").split(",") if x.strip()]
            if c.config_operation == APPEND:
                items += [v for v in values if v not in items]
            else:
                items = [x for x in items if x not in values]
            result[c.name] = ",".join(items)
        else:
            return result, (ErrorCode.INVALID_REQUEST, f"Unknown config operation {c.config_operation}")
    return result, None
