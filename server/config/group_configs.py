"""Group config resources (ConfigResource type 32): a group's overrides of the broker's group
settings (share.*, consumer.*, streams.*, errors.deadletterqueue.*; coordinator/group_config.py
defines them), set with IncrementalAlterConfigs or AlterConfigs and described with DescribeConfigs
as Kafka 4.4 answers them:

- altering: Kafka's GroupConfig.validate on the resulting configs (unknown names, ConfigDef's
  parsing and validators, ranges taken from the broker's current min/max configs, session timeout
  above heartbeat interval, no DLQ topic under `__`), INVALID_CONFIG with Kafka's messages; an empty
  group name is INVALID_REQUEST ("Default group resources are not allowed."); deleting every config
  deletes the resource;
- describing: every non-internal config, and the internal ones set, in Kafka's order, each with
  the group's value (source GROUP_CONFIG) or else the broker's synonym's value and source, and its
  synonyms (the group's, then the broker's). A group without configs is all defaults.

The AdminManager stores them (the single broker's metadata image; ZooKeeper in a cluster) and
`services.group_configs` (GroupConfigManager) serves them to the coordinators and the fetch path.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from ...coordinator.group_config import BROKER_BOUNDS, GROUP_CONFIGS, GroupConfigDef
from ...wire.errors import ErrorCode
from .config_resources import ConfigApiError, incremental_alter, invalid_request
from .kafka_config import ConfigEntry, ConfigError, ConfigSource, ConfigSynonym, ConfigType, parse_value, value_to_string

if TYPE_CHECKING:
    from ..context import BrokerServices

_TYPES = {"int": ConfigType.INT, "long": ConfigType.LONG, "boolean": ConfigType.BOOLEAN, "string": ConfigType.STRING,
          "list": ConfigType.LIST}


def _invalid_config(message: str) -> ConfigApiError:
    return ConfigApiError(ErrorCode.INVALID_CONFIG, message)


def check_group_name(name: str) -> None:
    if not name:
        raise invalid_request("Default group resources are not allowed.")


def validate(services: BrokerServices, configs: Mapping[str, str]) -> None:
    """Kafka's GroupConfig.validate: ConfigApiError(INVALID_CONFIG) with its message."""
    manager = services.group_configs
    for name in configs:
        if name not in GROUP_CONFIGS:
            raise _invalid_config(f"Unknown group config name: {name}")
    tags = configs.get("streams.rack.aware.assignment.tags")
    if tags is not None:
        items = [t for t in (p.strip() for p in tags.split(",")) if t] if tags.strip() else []
        if len(set(items)) != len(items):
            raise _invalid_config("streams.rack.aware.assignment.tags must not contain duplicate tag keys.")
    parsed = {}
    for name, raw in configs.items():
        definition = GROUP_CONFIGS[name]
        try:
            parsed[name] = parse_value(name, definition.type, raw)
        except ConfigError as error:
            raise _invalid_config(error.message) from None
        _check_validator(definition, parsed[name], raw)
    for name, (low_name, high_name) in BROKER_BOUNDS.items():
        if name not in parsed:
            continue
        value = parsed[name]
        low = None if low_name is None else manager.broker_value(low_name)
        high = None if high_name is None else manager.broker_value(high_name)
        if low is not None and high is not None:
            if not low <= value <= high:
                raise _invalid_config(f"{name} must be in the range {low} to {high} inclusive.")
        elif high is not None and value > high:
            raise _invalid_config(f"{name} must be less than or equal to {high}")
        elif low is not None and value < low:
            raise _invalid_config(f"{name} must be greater than or equal to {low}")
    if "streams.assignor.name" in parsed:
        registered = list(manager.broker_value("group.streams.assignors"))
        if parsed["streams.assignor.name"] not in registered:
            raise _invalid_config(f"streams.assignor.name '{parsed['streams.assignor.name']}' is not a registered task "
                                  f"assignor. Registered assignors are: [{', '.join(registered)}].")
    for kind in ("consumer", "share", "streams"):
        session, heartbeat = f"{kind}.session.timeout.ms", f"{kind}.heartbeat.interval.ms"
        if session in parsed or heartbeat in parsed:
            effective_session = parsed.get(session, manager.broker_value(f"group.{session}"))
            effective_heartbeat = parsed.get(heartbeat, manager.broker_value(f"group.{heartbeat}"))
            if effective_session <= effective_heartbeat:
                raise _invalid_config(f"{session} must be greater than {heartbeat}")
    dlq = parsed.get("errors.deadletterqueue.topic.name")
    if isinstance(dlq, str) and dlq.startswith("__"):
        raise _invalid_config("errors.deadletterqueue.topic.name: DLQ topic name must not start with '__'")


def _check_validator(definition: GroupConfigDef, value, raw: str) -> None:
    name = definition.name
    if definition.at_least is not None and value < definition.at_least:
        raise _invalid_config(f"Invalid value {value_to_string(value)} for configuration {name}: Value must be at least "
                              f"{definition.at_least}")
    if definition.one_of and value not in definition.one_of:
        raise _invalid_config(f"Invalid value {value} for configuration {name}: String must be one of: "
                              + ", ".join(definition.one_of))
    if name == "share.auto.offset.reset" and not valid_auto_offset_reset(value):
        raise _invalid_config(
            f"Invalid value {raw} for configuration {name}: Invalid value `{raw}` for configuration {name}. The value "
            "must be either 'earliest', 'latest' or of the format 'by_duration:<PnDTnHnMn.nS>'.")


def valid_auto_offset_reset(value: str) -> bool:
    """ShareGroupAutoOffsetResetStrategy.fromString: earliest, latest or by_duration:<ISO-8601 duration>
    (not negative), without case."""
    lowered = value.lower()
    if lowered in ("earliest", "latest"):
        return True
    if not lowered.startswith("by_duration:"):
        return False
    duration = value[len("by_duration:"):].strip()
    return parse_iso_duration_ms(duration) is not None


def parse_iso_duration_ms(text: str) -> int | None:
    """Java's Duration.parse (PnDTnHnMn.nS) in ms, or None for what it refuses or a negative duration."""
    import re
    match = re.fullmatch(r"([-+]?)P(?:([-+]?[0-9]+)D)?(T(?:([-+]?[0-9]+)H)?(?:([-+]?[0-9]+)M)?"
                         r"(?:([-+]?[0-9]+)(?:[.,]([0-9]{0,9}))?S)?)?", text, re.IGNORECASE)
    if match is None or text.upper().endswith("T") or not any(match.group(i) for i in (2, 4, 5, 6)):
        return None
    sign = -1 if match.group(1) == "-" else 1
    days, hours, minutes, seconds = (int(match.group(i) or 0) for i in (2, 4, 5, 6))
    fraction = match.group(7) or ""
    millis = int((fraction + "000")[:3]) if fraction else 0
    total = sign * (((days * 24 + hours) * 60 + minutes) * 60_000 + seconds * 1000
                    + (-millis if (match.group(6) or "").startswith("-") else millis))
    return None if total < 0 else total


def new_configs(services: BrokerServices, current: Mapping[str, str], name: str, changes,
                incremental: bool) -> dict[str, str]:
    """The group's configs after AlterConfigs (replace) or IncrementalAlterConfigs (edit), checked."""
    check_group_name(name)
    if incremental:
        configs = incremental_alter(
            current, changes, is_list=lambda key: key in GROUP_CONFIGS and GROUP_CONFIGS[key].type == "list",
            not_list_message=lambda operation, key: f"Can't {operation.name} to key {key} because its type is not LIST.",
            unset_value=lambda key: "")
    else:
        configs = {c.name: c.value for c in changes}
    validate(services, configs)
    return configs


def describe_group_configs(services: BrokerServices, name: str, keys) -> list[ConfigEntry]:
    """DescribeConfigs of a GROUP resource, as Kafka 4.4 answers it."""
    if not name:
        raise invalid_request("Group name must not be empty")
    overrides = services.admin.group_configs(services, name)
    broker = {}
    synonyms_wanted = [d.synonym for d in GROUP_CONFIGS.values() if d.synonym is not None]
    for entry in services.config.describe(synonyms_wanted):
        broker[entry.name] = entry
    entries = []
    for key, definition in GROUP_CONFIGS.items():
        if keys and key not in keys:
            continue
        if definition.internal and key not in overrides:
            continue
        synonyms: list[ConfigSynonym] = []
        if key in overrides:
            synonyms.append(ConfigSynonym(key, overrides[key], ConfigSource.GROUP_CONFIG))
        if definition.synonym is not None and definition.synonym in broker:
            b = broker[definition.synonym]
            synonyms.append(ConfigSynonym(definition.synonym, b.value, b.source))
        elif definition.synonym is not None:
            default = services.group_configs.broker_value(definition.synonym)
            synonyms.append(ConfigSynonym(definition.synonym, value_to_string(default), ConfigSource.DEFAULT_CONFIG))
        else:
            synonyms.append(ConfigSynonym(key, definition.default, ConfigSource.DEFAULT_CONFIG))
        value, source = synonyms[0].value, synonyms[0].source
        entries.append(ConfigEntry(key, value, source, read_only=False, is_sensitive=False,
                                   synonyms=tuple(synonyms), config_type=_TYPES[definition.type],
                                   documentation=definition.doc))
    return entries
