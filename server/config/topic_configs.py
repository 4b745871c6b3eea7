"""Changing a topic's config overrides (AlterConfigs replaces them, IncrementalAlterConfigs edits)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ...storage.errors import InvalidConfigurationException
from ...storage.log_config import LogConfig
from ...wire.errors import ErrorCode
from .kafka_config import ConfigError
from .config_resources import ConfigApiError, incremental_alter

if TYPE_CHECKING:
    from ..context import BrokerServices

LIST_TOPIC_CONFIGS = ("cleanup.policy", "leader.replication.throttled.replicas", "follower.replication.throttled.replicas")


def alter_topic_configs(services: BrokerServices, name: str, new_configs: dict[str, str], validate_only: bool) -> None:
    """Validate and (unless validate_only) store a topic's new overrides; ConfigApiError if refused."""
    check_topic_configs(services, services.metadata, name, new_configs)
    if not validate_only:
        services.replica_manager.update_topic_configs(name, new_configs)


def check_topic_configs(services: BrokerServices, metadata, name: str, new_configs: dict[str, str]) -> None:
    """ConfigApiError unless `name` is a topic of `metadata` and `new_configs` valid overrides for it."""
    if name not in metadata.topics:  # a ZooKeeper cluster's: Kafka 3.9's AdminZkClient; else Kafka 4.4's
        raise ConfigApiError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                             f"Topic {name} does not exist." if services.control_plane is not None
                             else f"The topic '{name}' does not exist.")
    try:
        services.config.validate_topic_configs(new_configs)
        LogConfig.from_props(new_configs, base=services.config.log_config())
    except ConfigError as e:
        raise ConfigApiError(ErrorCode.INVALID_CONFIG, str(e)) from None
    except InvalidConfigurationException as e:
        raise ConfigApiError(ErrorCode.INVALID_CONFIG, str(e.args[-1])) from None


def incremental_topic_configs(services: BrokerServices, name: str, changes) -> dict[str, str]:
    """Kafka's IncrementalAlterConfigs operations on a copy of a topic's overrides.

    APPEND and SUBTRACT start from the effective value (the override, else the broker's or
    Kafka's default), as Kafka does.
    """
    topic = services.metadata.topics.get(name)
    return incremental_overrides(services, topic.configs if topic else {}, changes)


def incremental_overrides(services: BrokerServices, overrides: dict[str, str], changes) -> dict[str, str]:
    """IncrementalAlterConfigs' `changes` applied to a copy of `overrides`."""
    return incremental_alter(
        overrides, changes, is_list=lambda name: name in LIST_TOPIC_CONFIGS,
        not_list_message=lambda operation, name: f"Config value append is not allowed for config key: {name}",
        unset_value=lambda name: _effective(services, overrides, name) or "")


def _effective(services: BrokerServices, overrides: dict[str, str], name: str) -> str | None:
    entries = services.config.describe_topic_configs(overrides, [name])
    return entries[0].value if entries else None
