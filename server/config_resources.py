"""What the config APIs (DescribeConfigs, AlterConfigs, IncrementalAlterConfigs) share: Kafka's
resource types and incremental operations, and the error that answers one resource."""

from __future__ import annotations

import re
from enum import IntEnum

from ..wire.errors import ErrorCode


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


class ConfigApiError(Exception):
    """A resource's error code and message in a config API's response (Kafka's ApiError)."""

    def __init__(self, code: ErrorCode, message: str | None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


_JAVA_INT = re.compile(r"[+-]?[0-9]+")


def invalid_request(message: str) -> ConfigApiError:
    return ConfigApiError(ErrorCode.INVALID_REQUEST, message)


def parse_node_id(name: str, what: str = "Node id") -> int:
    """A resource name that must be a node id, parsed as Java's Integer.parseInt does."""
    if not _JAVA_INT.fullmatch(name) or not -(2**31) <= int(name) < 2**31:
        raise invalid_request(f"{what} must be an integer, but it is: {name}")
    return int(name)
