"""The ACL APIs' codes (DescribeAcls, CreateAcls, DeleteAcls, and the *_authorized_operations bit
fields): Kafka's common.resource.ResourceType and PatternType, common.acl.AclOperation and
AclPermissionType. The broker's authorizer (server/security/authorizer.py) decides with them; the
`samsa acls` command prints them."""

from __future__ import annotations

from enum import IntEnum
from typing import TypeVar

CLUSTER_NAME = "kafka-cluster"  # the one name of the CLUSTER resource


class ResourceType(IntEnum):
    """org.apache.kafka.common.resource.ResourceType (not ConfigResource.Type)."""

    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7


class PatternType(IntEnum):
    UNKNOWN = 0
    ANY = 1  # in a filter: any pattern type, names compared exactly
    MATCH = 2  # in a filter: the patterns that would apply to the named resource
    LITERAL = 3
    PREFIXED = 4


class AclOperation(IntEnum):
    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14


class AclPermissionType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3


E = TypeVar("E", bound=IntEnum)


def enum_value(enum: type[E], code: int) -> E:
    """The member of `enum` for a wire code; UNKNOWN for codes it does not define (fromCode)."""
    try:
        return enum(code)
    except ValueError:
        return enum(0)
