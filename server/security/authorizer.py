"""Kafka's ACL authorizer, as its StandardAuthorizer (KRaft) decides; the ZooKeeper-era AclAuthorizer
decides the same. Pure: ACLs and a question in, an answer out; no I/O.

An ACL binding is a resource pattern (resource type; a LITERAL name, "*" for every name, or a
PREFIXED name) and an entry (principal, "User:*" for everyone; host, "*" for any; operation;
ALLOW or DENY). Deciding an operation on a resource:

* a principal listed in `super.users` may do anything;
* otherwise every ACL whose pattern matches the resource counts: one that matches the principal,
  host and operation and DENYs wins; else one that ALLOWs allows. ALLOW for READ, WRITE, DELETE or
  ALTER implies DESCRIBE, ALLOW for ALTER_CONFIGS implies DESCRIBE_CONFIGS, ALL is every
  operation; a DENY implies nothing but itself (or ALL);
* with no ACL on the resource at all, `allow.everyone.if.no.acl.found` decides (false: denied);
  ACLs on the resource for other principals or operations mean denied.

How handlers check (server/context.py; every handler, and every new one, does it this way, with
the operations Kafka's KafkaApis checks for that API):

    from ..authorizer import READ, WRITE, DESCRIBE, TOPIC, GROUP, CLUSTER, TRANSACTIONAL_ID

    if not ctx.authorize(READ, GROUP, group_id):            # one resource
        return error_response(ErrorCode.GROUP_AUTHORIZATION_FAILED)
    allowed = ctx.authorized(WRITE, TOPIC, names)           # many names: those allowed (a set)
    ctx.authorize(DESCRIBE, CLUSTER)                        # the cluster is named "kafka-cluster"
    ctx.authorized_operations(GROUP, group_id)              # *_authorized_operations bit field

Without an authorizer (`authorizer.class.name` empty, the default) every check is one attribute
test and allows everything. A transaction handler checks WRITE on TRANSACTIONAL_ID first
(TRANSACTIONAL_ID_AUTHORIZATION_FAILED), then READ on the GROUP for offsets, then the topics.
"""

from __future__ import annotations

import functools
import ipaddress
import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from ...wire.acl import CLUSTER_NAME, AclOperation, AclPermissionType, PatternType, ResourceType
from ..config.broker_config_defs import BrokerConfigDef

log = logging.getLogger("samsa.authorizer")

# Kafka's class names that turn the authorizer on; Samsa's authorizer decides as both do.
AUTHORIZER_CLASS_NAMES = (
    "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
    "kafka.security.authorizer.AclAuthorizer",
)
# StandardAuthorizer's own configs, which KafkaConfig does not define (the authorizer reads them
# from the broker's properties); the docs are Kafka's.
AUTHORIZER_CONFIGS = {
    "super.users": BrokerConfigDef(
        name="super.users", type="string", default=None, valid_values="", importance="low", update_mode="read-only", kafka_version=None,
        doc="A list of principals, separated by semicolons, that may perform every operation on every "
            "resource whatever the ACLs say, e.g. User:admin;User:broker."),
    "allow.everyone.if.no.acl.found": BrokerConfigDef(
        name="allow.everyone.if.no.acl.found", type="boolean", default=False, valid_values="", importance="low",
        update_mode="read-only", kafka_version=None,
        doc="Whether a resource with no ACL at all may be used by everyone (true) or only by super users (false)."),
}
WILDCARD = "*"  # a resource name or host matching all
WILDCARD_PRINCIPAL = "User:*"  # a principal matching all


# Short names for handlers, as KafkaApis imports AclOperation._ and ResourceType._.
TOPIC, GROUP, CLUSTER = ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER
TRANSACTIONAL_ID, DELEGATION_TOKEN, USER = ResourceType.TRANSACTIONAL_ID, ResourceType.DELEGATION_TOKEN, ResourceType.USER
ALL, READ, WRITE, CREATE, DELETE = AclOperation.ALL, AclOperation.READ, AclOperation.WRITE, AclOperation.CREATE, AclOperation.DELETE
ALTER, DESCRIBE, CLUSTER_ACTION = AclOperation.ALTER, AclOperation.DESCRIBE, AclOperation.CLUSTER_ACTION
DESCRIBE_CONFIGS, ALTER_CONFIGS = AclOperation.DESCRIBE_CONFIGS, AclOperation.ALTER_CONFIGS
IDEMPOTENT_WRITE, CREATE_TOKENS, DESCRIBE_TOKENS = (AclOperation.IDEMPOTENT_WRITE, AclOperation.CREATE_TOKENS,
                                                    AclOperation.DESCRIBE_TOKENS)
ALLOW, DENY = AclPermissionType.ALLOW, AclPermissionType.DENY

_IMPLIES_DESCRIBE = frozenset({DESCRIBE, READ, WRITE, DELETE, ALTER})
_IMPLIES_DESCRIBE_CONFIGS = frozenset({DESCRIBE_CONFIGS, ALTER_CONFIGS})

# Kafka's AclEntry.supportedOperations: what *_authorized_operations fields report on.
SUPPORTED_OPERATIONS = {
    TOPIC: (READ, WRITE, CREATE, DESCRIBE, DELETE, ALTER, DESCRIBE_CONFIGS, ALTER_CONFIGS),
    GROUP: (READ, DESCRIBE, DELETE, DESCRIBE_CONFIGS, ALTER_CONFIGS),
    CLUSTER: (CREATE, CLUSTER_ACTION, DESCRIBE_CONFIGS, ALTER_CONFIGS, IDEMPOTENT_WRITE, ALTER, DESCRIBE),
    TRANSACTIONAL_ID: (DESCRIBE, WRITE),
    DELEGATION_TOKEN: (DESCRIBE,),
    USER: (CREATE_TOKENS, DESCRIBE_TOKENS),
}


def operations_bit_field(operations: Iterable[AclOperation]) -> int:
    """Kafka's Utils.to32BitField: bit n set for the operation of code n."""
    return sum(1 << op for op in set(operations))


@dataclass(frozen=True)
class AclBinding:
    """One ACL: a resource pattern and an access control entry."""

    resource_type: ResourceType
    name: str
    pattern_type: PatternType
    principal: str
    host: str
    operation: AclOperation
    permission: AclPermissionType

    def to_json(self) -> dict[str, str]:
        return {"resource_type": self.resource_type.name, "name": self.name, "pattern_type": self.pattern_type.name,
                "principal": self.principal, "host": self.host, "operation": self.operation.name,
                "permission": self.permission.name}

    @classmethod
    def from_json(cls, data: dict[str, str]) -> "AclBinding":
        return cls(ResourceType[data["resource_type"]], data["name"], PatternType[data["pattern_type"]],
                   data["principal"], data["host"], AclOperation[data["operation"]],
                   AclPermissionType[data["permission"]])


@dataclass(frozen=True)
class AclBindingFilter:
    """Kafka's AclBindingFilter: None matches any name, principal or host; ANY any type,
    operation or permission; pattern type MATCH the patterns that apply to the named resource."""

    resource_type: ResourceType
    name: str | None
    pattern_type: PatternType
    principal: str | None
    host: str | None
    operation: AclOperation
    permission: AclPermissionType

    def unknown_element(self) -> str | None:
        """Why the filter cannot be used (an UNKNOWN element), as AclControlManager says; or None."""
        if self.resource_type == ResourceType.UNKNOWN or self.pattern_type == PatternType.UNKNOWN:
            return "Unknown patternFilter."
        if self.operation == AclOperation.UNKNOWN or self.permission == AclPermissionType.UNKNOWN:
            return "Unknown entryFilter."
        return None

    def matches(self, acl: AclBinding) -> bool:
        return self._matches_pattern(acl) and self._matches_entry(acl)

    def _matches_pattern(self, acl: AclBinding) -> bool:
        # ResourcePatternFilter.matches
        if self.resource_type != ResourceType.ANY and self.resource_type != acl.resource_type:
            return False
        if self.pattern_type not in (PatternType.ANY, PatternType.MATCH) and self.pattern_type != acl.pattern_type:
            return False
        if self.name is None:
            return True
        if self.pattern_type == PatternType.ANY or self.pattern_type == acl.pattern_type:
            return self.name == acl.name
        if acl.pattern_type == PatternType.LITERAL:  # MATCH
            return self.name == acl.name or acl.name == WILDCARD
        return self.name.startswith(acl.name)

    def _matches_entry(self, acl: AclBinding) -> bool:
        # AccessControlEntryFilter.matches: principals and hosts compared as written, no wildcards.
        return ((self.principal is None or self.principal == acl.principal)
                and (self.host is None or self.host == acl.host)
                and (self.operation == AclOperation.ANY or self.operation == acl.operation)
                and (self.permission == AclPermissionType.ANY or self.permission == acl.permission))


def invalid_new_acl(acl: AclBinding) -> str | None:
    """Why an ACL cannot be created (INVALID_REQUEST), as Kafka's AclApis and AclControlManager
    check in that order; None when it can."""
    if acl.resource_type == CLUSTER and acl.name != CLUSTER_NAME:
        return f"The only valid name for the CLUSTER resource is {CLUSTER_NAME}"
    if not acl.name:
        return "Invalid empty resource name"
    if acl.resource_type in (ResourceType.UNKNOWN, ResourceType.ANY):
        return f"Invalid resourceType {acl.resource_type.name}"
    if acl.pattern_type not in (PatternType.LITERAL, PatternType.PREFIXED):
        return f"Invalid patternType {acl.pattern_type.name}"
    if acl.operation in (AclOperation.UNKNOWN, AclOperation.ANY):
        return f"Invalid operation {acl.operation.name}"
    if acl.permission not in (ALLOW, DENY):
        return f"Invalid permissionType {acl.permission.name}"
    if ":" not in acl.principal:
        return (f"Could not parse principal from `{acl.principal}` (no colon is present separating the "
                "principal type from the principal name)")
    return None


def create_acls(current: Sequence[AclBinding], new: Sequence[AclBinding]) -> tuple[list[str | None], list[AclBinding]]:
    """Kafka's AclControlManager.createAcls: per new ACL an error message (None: created, or
    already there), and the ACLs after the change."""
    after = list(current)
    present = set(current)
    errors: list[str | None] = []
    for acl in new:
        error = invalid_new_acl(acl)
        if error is None and acl not in present:
            present.add(acl)
            after.append(acl)
        errors.append(error)
    return errors, after


def delete_acls(current: Sequence[AclBinding], filters: Sequence[AclBindingFilter]
                ) -> tuple[list[str | list[AclBinding]], list[AclBinding]]:
    """Kafka's AclControlManager.deleteAcls: per filter the ACLs it removes (or an error message),
    all at once; an ACL two filters match is reported by both. Returns the ACLs after the change."""
    results: list[str | list[AclBinding]] = []
    removed: set[AclBinding] = set()
    for f in filters:
        error = f.unknown_element()
        if error is not None:
            results.append(error)
            continue
        matched = [acl for acl in current if f.matches(acl)]
        removed.update(matched)
        results.append(matched)
    return results, [acl for acl in current if acl not in removed]


class _ResourceAcls:
    """The ACLs of one resource type, indexed for matching a resource name."""

    def __init__(self) -> None:
        self.literal: dict[str, list[AclBinding]] = {}
        self.prefixed: dict[str, list[AclBinding]] = {}
        self.prefix_lengths: list[int] = []

    def add(self, acl: AclBinding) -> None:
        index = self.literal if acl.pattern_type == PatternType.LITERAL else self.prefixed
        index.setdefault(acl.name, []).append(acl)
        if acl.pattern_type == PatternType.PREFIXED and len(acl.name) not in self.prefix_lengths:
            self.prefix_lengths = sorted(self.prefix_lengths + [len(acl.name)])

    def matching(self, name: str) -> Iterable[list[AclBinding]]:
        """The ACL lists whose patterns apply to `name`: its literal ACLs, the wildcard's, and
        those of every prefix of it."""
        for key in (name, WILDCARD) if name != WILDCARD else (name,):
            found = self.literal.get(key)
            if found:
                yield found
        for length in self.prefix_lengths:
            if length > len(name):
                break
            found = self.prefixed.get(name[:length])
            if found:
                yield found


def _decision(acl: AclBinding, principal: str, host: str, operation: AclOperation) -> AclPermissionType | None:
    """What `acl` says about the action (StandardAuthorizerData.findResult); None if it does not apply.
    The resource name is already known to match."""
    if acl.principal != principal and acl.principal != WILDCARD_PRINCIPAL:
        return None
    if acl.host != WILDCARD and acl.host != host:
        return None
    if acl.operation != ALL:
        if acl.permission == ALLOW:
            if operation == DESCRIBE:
                if acl.operation not in _IMPLIES_DESCRIBE:
                    return None
            elif operation == DESCRIBE_CONFIGS:
                if acl.operation not in _IMPLIES_DESCRIBE_CONFIGS:
                    return None
            elif acl.operation != operation:
                return None
        elif acl.operation != operation:
            return None
    return acl.permission


class StandardAuthorizer:
    """The ACLs in force and the authorizer's two configs; answers questions about them.

    Principals are compared in their string form "Type:name" (KafkaPrincipal.toString), hosts as
    the client's address as text.
    """

    def __init__(self, super_users: Iterable[str] = (), allow_everyone_if_no_acl_found: bool = False,
                 acls: Iterable[AclBinding] = ()) -> None:
        self.super_users = frozenset(super_users)
        self.allow_everyone_if_no_acl_found = allow_everyone_if_no_acl_found
        self.set_acls(acls)

    def set_acls(self, acls: Iterable[AclBinding]) -> None:
        """Replace the ACLs in force (after CreateAcls or DeleteAcls stored a new set)."""
        self._acls = tuple(acls)
        index: dict[ResourceType, _ResourceAcls] = {}
        for acl in self._acls:
            index.setdefault(acl.resource_type, _ResourceAcls()).add(acl)
        self._index = index

    def acls(self, acl_filter: AclBindingFilter | None = None) -> list[AclBinding]:
        """The ACLs matching a filter (all without one), in the order they were created."""
        return [acl for acl in self._acls if acl_filter is None or acl_filter.matches(acl)]

    def authorize(self, principal: str, host: str, operation: AclOperation, resource_type: ResourceType,
                  name: str) -> bool:
        if principal in self.super_users:
            return True
        section = self._index.get(resource_type)
        has_resource_acls = allowed = False
        if section is not None:
            for acls in section.matching(name):
                has_resource_acls = True
                for acl in acls:
                    decision = _decision(acl, principal, host, operation)
                    if decision == DENY:
                        return False
                    if decision == ALLOW:
                        allowed = True
        if allowed:
            return True
        return self.allow_everyone_if_no_acl_found and not has_resource_acls

    def authorize_by_resource_type(self, principal: str, host: str, operation: AclOperation,
                                   resource_type: ResourceType) -> bool:
        """Whether the principal may do `operation` on at least one resource of the type (Kafka's
        Authorizer.authorizeByResourceType): an ALLOW not dominated by a DENY of the same name or
        of a prefix of it; a wildcard DENY denies all."""
        # A hard-coded name first, as Kafka does, so super users pass whatever DENYs say.
        if self.authorize(principal, host, operation, resource_type, "hardcode"):
            return True
        deny_literal: set[str] = set()
        deny_prefixed: set[str] = set()
        allow: list[AclBinding] = []
        for acl in self._acls:
            if (acl.resource_type != resource_type or acl.host not in (host, WILDCARD)
                    or acl.principal not in (principal, WILDCARD_PRINCIPAL)
                    or acl.operation not in (operation, ALL)):
                continue
            if acl.permission == DENY:
                if acl.pattern_type == PatternType.LITERAL:
                    if acl.name == WILDCARD:
                        return False
                    deny_literal.add(acl.name)
                else:
                    deny_prefixed.add(acl.name)
            else:
                allow.append(acl)
        for acl in allow:
            if acl.pattern_type == PatternType.LITERAL and acl.name == WILDCARD:
                return True
        for acl in allow:
            if acl.pattern_type == PatternType.LITERAL and acl.name in deny_literal:
                continue
            if not any(acl.name[:n] in deny_prefixed for n in range(1, len(acl.name) + 1)):
                return True
        return False

    def authorized_operations(self, principal: str, host: str, resource_type: ResourceType, name: str) -> int:
        """The bit field of the operations the principal may do on the resource, among those Kafka
        reports for its type."""
        return operations_bit_field(op for op in SUPPORTED_OPERATIONS[resource_type]
                                    if self.authorize(principal, host, op, resource_type, name))


def new_authorizer(config, stored_acls: Iterable[dict[str, str]]) -> StandardAuthorizer | None:
    """The broker's authorizer from its KafkaConfig and the ACLs of its metadata image; None when
    `authorizer.class.name` is empty (every request allowed)."""
    if not config.authorizer_enabled:
        return None
    return StandardAuthorizer(config.super_users, config.get("allow.everyone.if.no.acl.found"),
                              [AclBinding.from_json(acl) for acl in stored_acls])


def supported_operations_bit_field(resource_type: ResourceType) -> int:
    """The authorized operations of every resource when no authorizer is configured."""
    return operations_bit_field(SUPPORTED_OPERATIONS[resource_type])


@functools.lru_cache(maxsize=4096)
def host_address(host: str) -> str:
    """A client's address as Java's InetAddress.getHostAddress prints it, which is how ACL hosts
    name it: IPv6 in eight groups without leading zeros ("0:0:0:0:0:0:0:1"), IPv4-mapped as IPv4."""
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return host
    if address.version == 4:
        return host
    if address.ipv4_mapped is not None:
        return str(address.ipv4_mapped)
    return ":".join(f"{int(group, 16):x}" for group in address.exploded.split(":"))


def audit_denied(principal: str, host: str, operation: AclOperation, resource_type: ResourceType, name: str,
                 request: str) -> None:
    """Kafka's authorizer audit line for an explicitly requested resource that was denied."""
    if log.isEnabledFor(logging.INFO):
        log.info("Principal = %s is Denied operation = %s from host = %s on resource = %s:LITERAL:%s for request = %s",
                 principal, operation.name, host, resource_type.name.title().replace("_", ""), name, request)
