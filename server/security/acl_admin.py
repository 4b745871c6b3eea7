"""What the ACL APIs (CreateAcls, DescribeAcls, DeleteAcls) share: the checks Kafka's AclApis makes
before any of them, request fields read as bindings and filters, and a changed set of ACLs
stored in the metadata image and put in force at once."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from ...wire.acl import enum_value
from ...wire.errors import ErrorCode
from .authorizer import (
    ALTER,
    CLUSTER,
    DESCRIBE,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
    StandardAuthorizer,
)

if TYPE_CHECKING:
    from ..metadata.image import MetadataStore

# Kafka 4.4's AclApis: DescribeAcls words it so, CreateAcls and DeleteAcls (and Kafka 3.9's) as below.
NO_AUTHORIZER_TO_DESCRIBE = "No Authorizer is configured on the broker"
NO_AUTHORIZER = "No Authorizer is configured."


def refusal(ctx, mutating: bool) -> tuple[ErrorCode, str] | None:
    """Why the request is refused as a whole (AclApis): CLUSTER_AUTHORIZATION_FAILED without ALTER
    (DESCRIBE to describe) on the cluster, SECURITY_DISABLED without an authorizer; None if not."""
    if not ctx.authorize(ALTER if mutating else DESCRIBE, CLUSTER):
        return ErrorCode.CLUSTER_AUTHORIZATION_FAILED, ErrorCode.CLUSTER_AUTHORIZATION_FAILED.message
    if ctx.services.authorizer is None:
        describe = not mutating and ctx.services.control_plane is None  # a single broker's DescribeAcls
        return ErrorCode.SECURITY_DISABLED, NO_AUTHORIZER_TO_DESCRIBE if describe else NO_AUTHORIZER
    return None


def binding_of(creation) -> AclBinding:
    """A CreateAcls AclCreation as an ACL binding."""
    return AclBinding(enum_value(ResourceType, creation.resource_type), creation.resource_name,
                      enum_value(PatternType, creation.resource_pattern_type), creation.principal, creation.host,
                      enum_value(AclOperation, creation.operation),
                      enum_value(AclPermissionType, creation.permission_type))


def filter_of(request_filter) -> AclBindingFilter:
    """A DescribeAcls request or a DeleteAcls filter as an ACL binding filter."""
    f = request_filter
    return AclBindingFilter(enum_value(ResourceType, f.resource_type_filter), f.resource_name_filter,
                            enum_value(PatternType, f.pattern_type_filter), f.principal_filter, f.host_filter,
                            enum_value(AclOperation, f.operation), enum_value(AclPermissionType, f.permission_type))


def store_acls(metadata: MetadataStore, authorizer: StandardAuthorizer, acls: Sequence[AclBinding]) -> None:
    """Make `acls` the ACLs in force: durably in the metadata first, then in the authorizer
    (OSError leaves both as they were)."""
    metadata.set_acls([acl.to_json() for acl in acls])
    authorizer.set_acls(acls)
