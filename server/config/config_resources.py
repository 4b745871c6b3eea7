"""What the config APIs (DescribeConfigs, AlterConfigs, IncrementalAlterConfigs) share: Kafka's
resource types and incremental operations, the error that answers one resource, and who may
describe or alter which."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping

from ...wire.config_resources import OpType, ResourceType
from ...wire.errors import ErrorCode
from ..security import authorizer as acl


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


def incremental_alter(current: Mapping[str, str], changes, *, is_list: Callable[[str], bool],
                      not_list_message: Callable[[OpType, str], str],
                      unset_value: Callable[[str], str]) -> dict[str, str]:
    """IncrementalAlterConfigs' SET, DELETE, APPEND and SUBTRACT on a copy of a resource's configs
    (ConfigurationControlManager.incrementalAlterConfigResource). Only configs `is_list` takes
    APPEND and SUBTRACT, else INVALID_CONFIG with `not_list_message(operation, name)` (the resource
    types word it differently); they start from the config's value, or `unset_value(name)` when it
    has none (a topic's effective value, say). APPEND adds the values the list lacks, SUBTRACT
    removes one occurrence of each."""
    result = dict(current)
    for c in changes:
        if c.config_operation == OpType.SET:
            result[c.name] = c.value
        elif c.config_operation == OpType.DELETE:
            result.pop(c.name, None)
        elif c.config_operation in (OpType.APPEND, OpType.SUBTRACT):
            operation = OpType(c.config_operation)
            if not is_list(c.name):
                raise ConfigApiError(ErrorCode.INVALID_CONFIG, not_list_message(operation, c.name))
            items = _list_items(result[c.name] if c.name in result else unset_value(c.name))
            for value in _list_items(c.value or ""):
                if operation == OpType.APPEND and value not in items:
                    items.append(value)
                elif operation == OpType.SUBTRACT and value in items:
                    items.remove(value)
            result[c.name] = ",".join(items)
        else:
            raise invalid_request(f"Unknown config operation {c.config_operation}")
    return result


def _list_items(text: str) -> list[str]:
    # A list's items, trimmed; an empty one names nothing to add or remove, and is left out.
    return [item.strip() for item in text.split(",") if item.strip()]


def check_authorized(ctx, operation: acl.AclOperation, kind: int, name: str) -> None:
    """Raise the error refusing `operation` (DESCRIBE_CONFIGS or ALTER_CONFIGS) on a config resource,
    as Kafka decides it: the cluster guards BROKER, BROKER_LOGGER and CLIENT_METRICS resources, a
    topic or a group its own configs."""
    if kind == ResourceType.TOPIC:
        target, error = (acl.TOPIC, name), ErrorCode.TOPIC_AUTHORIZATION_FAILED
    elif kind == ResourceType.GROUP:
        target, error = (acl.GROUP, name), ErrorCode.GROUP_AUTHORIZATION_FAILED
    elif kind in (ResourceType.BROKER, ResourceType.BROKER_LOGGER, ResourceType.CLIENT_METRICS):
        target, error = (acl.CLUSTER, acl.CLUSTER_NAME), ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    else:
        return  # not a resource type: the request is invalid whoever sends it
    if not ctx.authorize(operation, *target):
        raise ConfigApiError(error, error.message)
