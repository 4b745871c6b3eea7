"""`samsa acls list|create|delete [--principal User:x] [--operation Read] [--host H] [--topic T |
--group G | --cluster | --transactional-id X] [--allow|--deny] [--pattern literal|prefixed]`:
kafka-acls' --list, --add and --remove, through DescribeAcls, CreateAcls and DeleteAcls, with
kafka-acls' lines (`Current ACLs for resource `ResourcePattern(...)`:` then one ACL a line)."""

from __future__ import annotations

import argparse
from collections.abc import Iterable
from enum import IntEnum
from typing import Any

import trio

from ..wire.acl import CLUSTER_NAME, AclOperation, AclPermissionType, PatternType, ResourceType, enum_value
from ..wire.protocol import message_class
from . import BAD_USAGE, CommandError
from .client import add_connection_arguments, check_error, open_client

HELP = "list, create and delete ACLs"

DescribeAclsRequest = message_class("DescribeAclsRequest")
CreateAclsRequest = message_class("CreateAclsRequest")
DeleteAclsRequest = message_class("DeleteAclsRequest")


def enum_argument(enum: type[IntEnum]):
    """argparse type of an enum member in Kafka's spellings: Read, READ, IdempotentWrite, idempotent-write."""
    names = {member.name.replace("_", ""): member for member in enum if member.name not in ("UNKNOWN",)}

    def parse(text: str) -> IntEnum:
        member = names.get(text.replace("-", "").replace("_", "").upper())
        if member is None:
            raise argparse.ArgumentTypeError(f"{text!r} is not one of {', '.join(m.name for m in names.values())}")
        return member

    parse.__name__ = enum.__name__
    return parse


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_connection_arguments(parser)
    parser.add_argument("action", choices=["list", "create", "delete"])
    parser.add_argument("--principal", help="e.g. User:alice (list, delete: all principals if unset)")
    parser.add_argument("--operation", type=enum_argument(AclOperation),
                        help="Read, Write, Create, Delete, Alter, Describe, ClusterAction, DescribeConfigs, "
                             "AlterConfigs, IdempotentWrite, All")
    parser.add_argument("--host", help="the client host the ACL applies to (create: default *)")
    resource = parser.add_mutually_exclusive_group()
    resource.add_argument("--topic", metavar="T")
    resource.add_argument("--group", metavar="G")
    resource.add_argument("--cluster", action="store_true")
    resource.add_argument("--transactional-id", metavar="X")
    permission = parser.add_mutually_exclusive_group()
    permission.add_argument("--allow", dest="permission", action="store_const", const=AclPermissionType.ALLOW)
    permission.add_argument("--deny", dest="permission", action="store_const", const=AclPermissionType.DENY)
    parser.add_argument("--pattern", choices=["literal", "prefixed", "match", "any"],
                        help="how the resource name matches (create: default literal)")


def run(args: argparse.Namespace) -> int:
    return trio.run(ACTIONS[args.action], args)


def resource_of(args: argparse.Namespace) -> tuple[ResourceType, str | None]:
    """The resource type and name the arguments name (ANY and None when none)."""
    if args.topic is not None:
        return ResourceType.TOPIC, args.topic
    if args.group is not None:
        return ResourceType.GROUP, args.group
    if args.transactional_id is not None:
        return ResourceType.TRANSACTIONAL_ID, args.transactional_id
    if args.cluster:
        return ResourceType.CLUSTER, CLUSTER_NAME
    return ResourceType.ANY, None


def acl_filter(args: argparse.Namespace) -> dict[str, Any]:
    """The filter fields of DescribeAcls and DeleteAcls: what is unset matches anything."""
    resource_type, name = resource_of(args)
    pattern = PatternType[args.pattern.upper()] if args.pattern else (
        PatternType.ANY if name is None else PatternType.LITERAL)
    return dict(resource_type_filter=resource_type, resource_name_filter=name, pattern_type_filter=pattern,
                principal_filter=args.principal, host_filter=args.host,
                operation=args.operation or AclOperation.ANY, permission_type=args.permission or AclPermissionType.ANY)


def pattern_text(resource_type: int, name: str, pattern: int) -> str:
    """Kafka's ResourcePattern.toString."""
    return (f"ResourcePattern(resourceType={enum_value(ResourceType, resource_type).name}, name={name}, "
            f"patternType={enum_value(PatternType, pattern).name})")


def entry_text(acl: Any) -> str:
    """Kafka's AccessControlEntry.toString."""
    return (f"(principal={acl.principal}, host={acl.host}, operation={enum_value(AclOperation, acl.operation).name}, "
            f"permissionType={enum_value(AclPermissionType, acl.permission_type).name})")


def print_acls(heading: str, pattern: str, entries: Iterable[str]) -> None:
    """kafka-acls' block (Kafka 4's AclCommand, whose --add heading has a space more): a heading
    naming the resource pattern, one ACL a line, an empty line."""
    lines = "\n".join(f"\t{entry}" for entry in entries)
    if heading == "Adding ACLs":
        print(f"{heading} for resource `{pattern}`: \n {lines}\n")
    else:
        print(f"{heading} for resource `{pattern}`:\n{lines}\n")


async def list_acls(args: argparse.Namespace) -> int:
    async with open_client(args) as client:
        response = await client.send_to_controller(DescribeAclsRequest(**acl_filter(args)))
    check_error(response.error_code, response.error_message)
    for resource in response.resources:
        print_acls("Current ACLs", pattern_text(resource.resource_type, resource.resource_name, resource.pattern_type),
                   map(entry_text, resource.acls))
    return 0


async def create(args: argparse.Namespace) -> int:
    resource_type, name = resource_of(args)
    if args.principal is None or args.operation is None or name is None:
        raise CommandError("create needs --principal, --operation and a resource (--topic, --group, --cluster or "
                           "--transactional-id)", BAD_USAGE)
    pattern = PatternType[(args.pattern or "literal").upper()]
    if pattern not in (PatternType.LITERAL, PatternType.PREFIXED):
        raise CommandError("create takes --pattern literal or prefixed", BAD_USAGE)
    creation = CreateAclsRequest.AclCreation(
        resource_type=resource_type, resource_name=name, resource_pattern_type=pattern, principal=args.principal,
        host=args.host or "*", operation=args.operation, permission_type=args.permission or AclPermissionType.ALLOW)
    async with open_client(args) as client:
        response = await client.send_to_controller(CreateAclsRequest(creations=[creation]))
    for result in response.results:
        check_error(result.error_code, result.error_message)
    print_acls("Adding ACLs", pattern_text(resource_type, name, pattern), [entry_text(creation)])
    return 0


async def delete(args: argparse.Namespace) -> int:
    if args.principal is None and args.operation is None and resource_of(args)[1] is None:
        raise CommandError("delete needs --principal, --operation or a resource: it would delete every ACL",
                           BAD_USAGE)
    async with open_client(args) as client:
        response = await client.send_to_controller(
            DeleteAclsRequest(filters=[DeleteAclsRequest.DeleteAclsFilter(**acl_filter(args))]))
    removed: dict[str, list[str]] = {}
    for result in response.filter_results:
        check_error(result.error_code, result.error_message)
        for acl in result.matching_acls:
            check_error(acl.error_code, acl.error_message)
            removed.setdefault(pattern_text(acl.resource_type, acl.resource_name, acl.pattern_type), []).append(
                entry_text(acl))
    for pattern, entries in removed.items():
        print_acls("Removed ACLs", pattern, entries)
    return 0


ACTIONS = {"list": list_acls, "create": create, "delete": delete}
