"""The BROKER_LOGGER resource (KIP-412): Python's loggers, shown and changed as Kafka shows and
changes its log4j loggers. Levels change for this process only and are not kept across restarts,
as in Kafka."""

from __future__ import annotations

import logging
from collections.abc import Iterable

from ...wire.errors import ErrorCode
from .kafka_config import ConfigEntry, ConfigSource, ConfigType
from .config_resources import ConfigApiError, OpType, invalid_request, parse_node_id

ROOT_LOGGER = "root"
# log4j's levels on Python's scale (Python has no TRACE; FATAL is its CRITICAL).
LEVELS = {"TRACE": 5, "DEBUG": logging.DEBUG, "INFO": logging.INFO, "WARN": logging.WARNING,
          "ERROR": logging.ERROR, "FATAL": logging.CRITICAL}
VALID_LOG_LEVELS = ", ".join(sorted(LEVELS))

log = logging.getLogger("samsa.broker_loggers")


def _existing(name: str) -> logging.Logger | None:
    if name == ROOT_LOGGER:
        return logging.getLogger()
    found = logging.Logger.manager.loggerDict.get(name)
    # A PlaceHolder stands for a parent no one has asked for: not a logger yet, as in log4j.
    return found if isinstance(found, logging.Logger) else None


def _level_name(level: int) -> str:
    # The most severe log4j level the Python level reaches; below DEBUG everything is TRACE.
    return max((name for name, value in LEVELS.items() if value <= level), key=LEVELS.__getitem__, default="TRACE")


def loggers() -> dict[str, str]:
    """Every logger with its effective level, and the root logger (Log4jController.loggers)."""
    found = {
        name: _level_name(logger.getEffectiveLevel())
        for name, logger in logging.Logger.manager.loggerDict.items()
        if isinstance(logger, logging.Logger)
    }
    found[ROOT_LOGGER] = _level_name(logging.getLogger().getEffectiveLevel())
    return found


def describe_loggers(name: str, node_id: int, names: Iterable[str] | None = None) -> list[ConfigEntry]:
    """DescribeConfigs of the BROKER_LOGGER resource `name` (this broker's id): every logger, or
    those of `names` that exist, sorted by name."""
    if not name:
        raise invalid_request("Broker id must not be empty")
    if parse_node_id(name, "Broker id") != node_id:
        raise invalid_request(f"Unexpected broker id, expected {node_id} but received {name}")
    levels = loggers()
    wanted = levels.keys() if names is None else levels.keys() & set(names)
    return [
        ConfigEntry(name=logger, value=levels[logger], source=ConfigSource.DYNAMIC_BROKER_LOGGER_CONFIG,
                    read_only=False, is_sensitive=False, synonyms=(), config_type=ConfigType.UNKNOWN,
                    documentation="")  # Kafka's ConfigHelper leaves the field's default, asked for or not
        for logger in sorted(wanted)
    ]


def alter_loggers(name: str, node_id: int, changes, validate_only: bool) -> None:
    """IncrementalAlterConfigs on a BROKER_LOGGER resource (RuntimeLoggerManager): SET a logger's
    level, DELETE it so the logger inherits its parent's; every change is checked before any applies."""
    if parse_node_id(name) != node_id:
        # Kafka's message prints its own node id twice.
        raise invalid_request(f"Unexpected node id. Expected {node_id}, but received {node_id}")
    for change in changes:
        operation = change.config_operation
        if operation == OpType.SET:
            _check_exists(change.name)
            if change.value not in LEVELS:
                raise ConfigApiError(ErrorCode.INVALID_CONFIG,
                                     f"Cannot set the log level of {change.name} to {change.value} as it is not a "
                                     f"supported log level. Valid log levels are {VALID_LOG_LEVELS}")
        elif operation == OpType.DELETE:
            _check_exists(change.name)
            if change.name == ROOT_LOGGER:
                raise invalid_request(f"Removing the log level of the {ROOT_LOGGER} logger is not allowed")
        elif operation in (OpType.APPEND, OpType.SUBTRACT):
            raise invalid_request(f"{OpType(operation).name} operation is not allowed for the BROKER_LOGGER resource")
        else:
            raise invalid_request(f"Unknown operation type {operation} is not allowed for the BROKER_LOGGER resource")
    if validate_only:
        return
    for change in changes:
        logger = _existing(change.name)
        assert logger is not None
        if change.config_operation == OpType.SET:
            logger.setLevel(LEVELS[change.value])
            log.warning("Updated the log level of %s to %s", change.name, change.value)
        else:
            logger.setLevel(logging.NOTSET)
            log.warning("Unset the log level of %s", change.name)


def _check_exists(name: str) -> None:
    if _existing(name) is None:
        raise ConfigApiError(ErrorCode.INVALID_CONFIG, f"Logger {name} does not exist!")
