"""The config APIs' codes (DescribeConfigs, AlterConfigs, IncrementalAlterConfigs,
ListConfigResources): Kafka's ConfigResource.Type, AlterConfigOp.OpType and ConfigEntry's
ConfigSource. The broker's config modules (server/config/) answer with them; `samsa configs` and
`samsa topics` send and print them."""

from __future__ import annotations

from enum import IntEnum


class ResourceType(IntEnum):
    """ConfigResource.Type."""

    UNKNOWN = 0
    TOPIC = 2
    BROKER = 4
    BROKER_LOGGER = 8
    CLIENT_METRICS = 16
    GROUP = 32


class OpType(IntEnum):
    """AlterConfigOp.OpType of IncrementalAlterConfigs."""

    SET = 0
    DELETE = 1
    APPEND = 2
    SUBTRACT = 3


class ConfigSource(IntEnum):
    """DescribeConfigs' ConfigSource."""

    UNKNOWN = 0
    TOPIC_CONFIG = 1
    DYNAMIC_BROKER_CONFIG = 2
    DYNAMIC_DEFAULT_BROKER_CONFIG = 3
    STATIC_BROKER_CONFIG = 4
    DEFAULT_CONFIG = 5
    DYNAMIC_BROKER_LOGGER_CONFIG = 6
    CLIENT_METRICS_CONFIG = 7
    GROUP_CONFIG = 8
