"""Client quota configuration, sans I/O: quota entities, the quota keys each may carry, and the
checks and filters of AlterClientQuotas and DescribeClientQuotas (Kafka's
ClientQuotaControlManager and ClientQuotasImage.describe).

An entity is a tuple of (entity type, name) pairs sorted by type, the name None for the type's
<default>: ``(("client-id", "slow"),)``, ``(("client-id", None), ("user", "alice"))``. The
configuration is a mapping of entity to {quota key: value}.
"""

from __future__ import annotations

import ipaddress
import math
from collections.abc import Iterable, Mapping, MutableMapping

from ..wire.errors import ErrorCode

USER, CLIENT_ID, IP = "user", "client-id", "ip"

PRODUCER_BYTE_RATE = "producer_byte_rate"
CONSUMER_BYTE_RATE = "consumer_byte_rate"
REQUEST_PERCENTAGE = "request_percentage"
CONTROLLER_MUTATION_RATE = "controller_mutation_rate"
CONNECTION_CREATION_RATE = "connection_creation_rate"

# Kafka's QuotaConfig: the keys of user and client-id entities, and of ip entities, by type.
CLIENT_QUOTA_KEYS = {PRODUCER_BYTE_RATE: "LONG", CONSUMER_BYTE_RATE: "LONG",
                     REQUEST_PERCENTAGE: "DOUBLE", CONTROLLER_MUTATION_RATE: "DOUBLE"}
IP_QUOTA_KEYS = {CONNECTION_CREATION_RATE: "INT"}
_INTEGRAL_MAX = {"INT": 2**31 - 1, "LONG": 2**63 - 1}

# DescribeClientQuotas match types.
MATCH_EXACT, MATCH_DEFAULT, MATCH_SPECIFIED = 0, 1, 2

Entity = tuple[tuple[str, str | None], ...]
QuotaConfigs = Mapping[Entity, Mapping[str, float]]

_ABSENT = object()


def quota_entity(*, user=_ABSENT, client_id=_ABSENT, ip=_ABSENT) -> Entity:
    """The entity of the given parts; None names a part's <default>, an omitted part is not in it."""
    parts = ((CLIENT_ID, client_id), (IP, ip), (USER, user))  # sorted by type
    return tuple((kind, name) for kind, name in parts if name is not _ABSENT)


def describe_entity(entity: Entity) -> str:
    inner = ", ".join(f"{kind}={'<default>' if name is None else name}" for kind, name in entity)
    return f"ClientQuotaEntity({inner})"


class QuotaRequestError(Exception):
    """A request the quota configuration refuses: an error code and Kafka's message for it."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code


def _invalid(message: str) -> QuotaRequestError:
    return QuotaRequestError(ErrorCode.INVALID_REQUEST, message)


def _is_ip(name: str | None) -> bool:
    if name is None:
        return True
    try:
        ipaddress.ip_address(name)
    except ValueError:
        return False
    return True


def validate_entity(parts: Iterable[tuple[str, str | None]]) -> tuple[Entity, dict[str, str]]:
    """The entity named by (type, name) pairs and the quota keys it may carry, or raise."""
    named: dict[str, str | None] = {}
    for kind, name in parts:
        if kind in named:
            raise _invalid(f"Invalid client quota entity, duplicate entity entry {kind}")
        if kind not in (USER, CLIENT_ID, IP):
            raise _invalid(f"Unhandled client quota entity type: {kind}")
        if name is not None and not name:
            raise _invalid(f"Empty {kind} not supported")
        named[kind] = name
    if not named:
        raise _invalid("Invalid empty client quota entity")
    entity = tuple(sorted(named.items()))
    if IP in named:
        if len(named) > 1:
            raise _invalid("Invalid quota entity combination, IP entity should not be combined with User or ClientId")
        if not _is_ip(named[IP]):
            raise _invalid(f"{named[IP]} is not a valid IP or resolvable host.")
        return entity, IP_QUOTA_KEYS
    return entity, CLIENT_QUOTA_KEYS


def validate_value(keys: Mapping[str, str], key: str, value: float) -> None:
    config_type = keys.get(key)
    if config_type is None:
        raise _invalid(f"Invalid configuration key {key}")
    if not math.isfinite(value):
        raise _invalid(f"Invalid value {value} for configuration {key}")
    if value <= 0.0:
        raise _invalid(f"Quota {key} must be greater than 0")
    if config_type in _INTEGRAL_MAX:
        if value > _INTEGRAL_MAX[config_type]:
            raise _invalid(f"Proposed value for {key} is too large for {'an INT' if config_type == 'INT' else 'a LONG'}.")
        if abs(value % 1.0) > 1e-6:
            raise _invalid(f"{key} cannot be a fractional value.")


def plan_alteration(parts, ops: Iterable[tuple[str, float, bool]]) -> tuple[Entity, dict[str, float | None]]:
    """The changes one AlterClientQuotas entry asks for (None removes a key), or raise.
    `ops` are (key, value, remove)."""
    entity, keys = validate_entity(parts)
    changes: dict[str, float | None] = {}
    for key, value, remove in ops:
        if key in changes:
            raise _invalid(f"Duplicate quota key {key} not updating quota for this entity {describe_entity(entity)}")
        if not remove:
            validate_value(keys, key, value)
        changes[key] = None if remove else float(value)
    return entity, changes


def apply_changes(quotas: MutableMapping[Entity, dict[str, float]], entity: Entity,
                  changes: Mapping[str, float | None]) -> None:
    values = dict(quotas.get(entity, {}))
    for key, value in changes.items():
        if value is None:
            values.pop(key, None)
        else:
            values[key] = value
    if values:
        quotas[entity] = values
    else:
        quotas.pop(entity, None)


def describe(quotas: QuotaConfigs, components: Iterable[tuple[str, int, str | None]],
             strict: bool) -> list[tuple[Entity, dict[str, float]]]:
    """The configured entities a DescribeClientQuotas filter matches, or raise.

    `components` are (entity type, match type, match): exact name, the <default>, or any entity
    with that type. Without `strict`, entities may have more types than the filter names."""
    exact: dict[str, str | None] = {}
    typed: set[str] = set()
    for kind, match_type, match in components:
        if not kind:
            raise _invalid("Invalid empty entity type.")
        if kind in exact or kind in typed:
            raise _invalid(f"Entity type {kind} cannot appear more than once in the filter.")
        if kind not in (USER, CLIENT_ID, IP):
            raise QuotaRequestError(ErrorCode.UNSUPPORTED_VERSION, f"Unsupported entity type {kind}")
        if match_type == MATCH_EXACT:
            if match is None:
                raise _invalid("Request specified MATCH_TYPE_EXACT, but set match string to null.")
            exact[kind] = match
        elif match_type == MATCH_DEFAULT:
            if match is not None:
                raise _invalid("Request specified MATCH_TYPE_DEFAULT, but also specified a match string.")
            exact[kind] = None
        elif match_type == MATCH_SPECIFIED:
            if match is not None:
                raise _invalid("Request specified MATCH_TYPE_SPECIFIED, but also specified a match string.")
            typed.add(kind)
        else:
            raise _invalid(f"Unknown match type {match_type}")
    wanted = set(exact) | typed
    if IP in wanted and wanted & {USER, CLIENT_ID}:
        raise _invalid("Invalid entity filter component combination. IP filter component should not be used "
                       "with user or clientId filter component.")
    found = []
    for entity, values in quotas.items():
        named = dict(entity)
        if strict and len(named) != len(wanted):
            continue
        if all(kind in named and named[kind] == name for kind, name in exact.items()) and typed <= named.keys():
            found.append((entity, dict(values)))
    found.sort(key=lambda item: [(kind, name or "") for kind, name in item[0]])
    return found
