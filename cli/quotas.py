"""`samsa quotas describe|alter [--user U] [--client-id C] [-c KEY=VALUE ...] [--delete-config KEY ...]`:
client quotas (producer_byte_rate, consumer_byte_rate, request_percentage, ...) as kafka-configs
--entity-type users/clients handles them, through DescribeClientQuotas and AlterClientQuotas. The
name `<default>` stands for the default entity (every user, or client id, without one of its own)."""

from __future__ import annotations

import argparse
from typing import Any

import trio

from ..server.config.kafka_config import value_to_string
from ..wire.protocol import message_class
from . import BAD_USAGE, CommandError
from .client import add_connection_arguments, check_error, open_client
from .configs import add_config_change_arguments

HELP = "describe or alter client quotas of users and client ids"

DescribeClientQuotasRequest = message_class("DescribeClientQuotasRequest")
AlterClientQuotasRequest = message_class("AlterClientQuotasRequest")

DEFAULT_ENTITY = "<default>"
USER, CLIENT_ID = "user", "client-id"
MATCH_EXACT, MATCH_DEFAULT = 0, 1  # DescribeClientQuotas' match types
ENTITY_WORDS = {USER: "user-principal", CLIENT_ID: "client-id"}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_connection_arguments(parser)
    parser.add_argument("action", choices=["describe", "alter"])
    parser.add_argument("--user", metavar="U", help=f"a user principal's name, or {DEFAULT_ENTITY}")
    parser.add_argument("--client-id", metavar="C", help=f"a client id, or {DEFAULT_ENTITY}")
    add_config_change_arguments(parser)


def run(args: argparse.Namespace) -> int:
    return trio.run(ACTIONS[args.action], args)


def entity_of(args: argparse.Namespace) -> list[tuple[str, str | None]]:
    """The entity's (type, name) pairs; a None name is the default entity."""
    given = [(USER, args.user), (CLIENT_ID, args.client_id)]
    return [(kind, None if name == DEFAULT_ENTITY else name) for kind, name in given if name is not None]


def entity_text(entity: list[tuple[str, str | None]]) -> str:
    """kafka-configs' words for an entity: user-principal 'alice', the default client-id."""
    return ", ".join(f"the default {ENTITY_WORDS.get(kind, kind)}" if name is None
                     else f"{ENTITY_WORDS.get(kind, kind)} '{name}'" for kind, name in entity)


def updated_text(entity: list[tuple[str, str | None]]) -> str:
    """kafka-configs' line after an alter, which names the first entity type only."""
    kind, name = entity[0]
    noun = "user" if kind == USER else "client"
    if name is None:
        return f"Completed updating default config for {noun}s in the cluster."
    return f"Completed updating config for {noun} {name}."


async def describe(args: argparse.Namespace) -> int:
    Component = DescribeClientQuotasRequest.ComponentData
    components = [Component(entity_type=kind, match_type=MATCH_DEFAULT if name is None else MATCH_EXACT, match=name)
                  for kind, name in entity_of(args)]
    async with open_client(args) as client:
        response = await client.send_to_controller(DescribeClientQuotasRequest(components=components, strict=False))
    check_error(response.error_code, response.error_message)
    lines = []
    for entry in response.entries or []:
        entity = sorted(((e.entity_type, e.entity_name) for e in entry.entity), key=lambda e: e[0] != USER)
        values = ", ".join(f"{v.key}={value_to_string(float(v.value))}" for v in sorted(entry.values, key=lambda v: v.key))
        lines.append(f"Quota configs for {entity_text(entity)} are {values}")
    for line in sorted(lines):
        print(line)
    return 0


def quota_ops(args: argparse.Namespace) -> list[Any]:
    """-c KEY=VALUE (a number) and --delete-config KEY as AlterClientQuotas operations."""
    Op = AlterClientQuotasRequest.OpData
    ops = []
    for key, value in args.configs:
        try:
            ops.append(Op(key=key, value=float(value), remove=False))
        except ValueError:
            raise CommandError(f"quota {key}: {value!r} is not a number", BAD_USAGE) from None
    return ops + [Op(key=key, value=0.0, remove=True) for key in args.delete_configs]


async def alter(args: argparse.Namespace) -> int:
    entity = entity_of(args)
    if not entity:
        raise CommandError("alter needs --user or --client-id", BAD_USAGE)
    ops = quota_ops(args)
    if not ops:
        raise CommandError("alter needs -c KEY=VALUE or --delete-config KEY", BAD_USAGE)
    Entry, Entity = AlterClientQuotasRequest.EntryData, AlterClientQuotasRequest.EntityData
    request = AlterClientQuotasRequest(entries=[Entry(
        entity=[Entity(entity_type=kind, entity_name=name) for kind, name in entity], ops=ops)])
    async with open_client(args) as client:
        response = await client.send_to_controller(request)
    for result in response.entries:
        check_error(result.error_code, result.error_message, entity_text(entity))
    print(updated_text(entity))
    return 0


ACTIONS = {"describe": describe, "alter": alter}
