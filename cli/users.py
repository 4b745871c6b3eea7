"""`samsa users list|create|delete [NAME] [--mechanism SCRAM-SHA-256] [--password P] [--iterations N]`:
SCRAM users (kafka-configs --entity-type users --add-config 'SCRAM-SHA-256=[password=...]'), through
DescribeUserScramCredentials and AlterUserScramCredentials. The password is salted here, as Kafka's
admin client does: the broker never receives it."""

from __future__ import annotations

import argparse
import getpass
import secrets
import sys

import trio

from ..client.scram import MAX_ITERATIONS, ScramMechanism
from ..wire.errors import ErrorCode
from ..wire.protocol import message_class
from . import BAD_USAGE, CommandError
from .client import KafkaClient, add_connection_arguments, check_error, open_client

HELP = "list, create and delete SCRAM users"

DescribeUserScramCredentialsRequest = message_class("DescribeUserScramCredentialsRequest")
AlterUserScramCredentialsRequest = message_class("AlterUserScramCredentialsRequest")

MECHANISMS = {m.mechanism_name: m for m in ScramMechanism}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_connection_arguments(parser)
    parser.add_argument("action", choices=["list", "create", "delete"])
    parser.add_argument("name", nargs="?", help="the user (list: all users if unset)")
    parser.add_argument("--mechanism", choices=list(MECHANISMS),
                        help="create: default SCRAM-SHA-256; delete: default every mechanism the user has")
    parser.add_argument("--password", help="create: the password (asked for on a terminal if unset)")
    parser.add_argument("--iterations", type=int, default=4096, help="create: PBKDF2 iterations (default 4096)")


def run(args: argparse.Namespace) -> int:
    if args.action != "list" and not args.name:
        raise CommandError(f"{args.action} needs the user's NAME", BAD_USAGE)
    return trio.run(ACTIONS[args.action], args)


def mechanism_name(type_id: int) -> str:
    mechanism = ScramMechanism.from_type(type_id)
    return mechanism.mechanism_name if mechanism else f"UNKNOWN({type_id})"


async def credentials(client: KafkaClient, names: list[str] | None) -> dict[str, list[tuple[int, int]]]:
    """Each user's (mechanism's type id, iterations), by DescribeUserScramCredentials (None: every
    user)."""
    UserName = DescribeUserScramCredentialsRequest.UserName
    request = DescribeUserScramCredentialsRequest(users=None if names is None else [UserName(name=n) for n in names])
    response = await client.send_to_controller(request)
    check_error(response.error_code, response.error_message)
    found = {}
    for result in response.results:
        check_error(result.error_code, result.error_message, result.user)
        found[result.user] = [(c.mechanism, c.iterations) for c in result.credential_infos]
    return found


async def list_users(args: argparse.Namespace) -> int:
    async with open_client(args) as client:
        found = await credentials(client, [args.name] if args.name else None)
    for user in sorted(found):
        described = ", ".join(f"{mechanism_name(type_id)}=iterations={iterations}"
                              for type_id, iterations in found[user])
        print(f"SCRAM credential configs for user-principal '{user}' are {described}")
    return 0


async def alter(client: KafkaClient, request) -> None:
    response = await client.send_to_controller(request)
    for result in response.results:
        check_error(result.error_code, result.error_message, result.user)


async def create(args: argparse.Namespace) -> int:
    mechanism = MECHANISMS[args.mechanism or "SCRAM-SHA-256"]
    if not mechanism.min_iterations <= args.iterations <= MAX_ITERATIONS:
        raise CommandError(f"--iterations must be between {mechanism.min_iterations} and {MAX_ITERATIONS}", BAD_USAGE)
    password = args.password
    if password is None:
        if not sys.stdin.isatty():
            raise CommandError("create needs --password (or a terminal to ask for it)", BAD_USAGE)
        password = getpass.getpass(f"password for {args.name}: ")
    salt = secrets.token_bytes(32)
    upsertion = AlterUserScramCredentialsRequest.ScramCredentialUpsertion(
        name=args.name, mechanism=mechanism.type_id, iterations=args.iterations, salt=salt,
        salted_password=mechanism.salted_password(password, salt, args.iterations))
    async with open_client(args) as client:
        await alter(client, AlterUserScramCredentialsRequest(deletions=[], upsertions=[upsertion]))
    print(f"Completed updating config for user {args.name}.")
    return 0


async def delete(args: argparse.Namespace) -> int:
    Deletion = AlterUserScramCredentialsRequest.ScramCredentialDeletion
    async with open_client(args) as client:
        if args.mechanism:
            type_ids = [MECHANISMS[args.mechanism].type_id]
        else:
            type_ids = [type_id for type_id, _ in (await credentials(client, [args.name])).get(args.name, [])]
            if not type_ids:
                check_error(ErrorCode.RESOURCE_NOT_FOUND, f"no SCRAM credential for {args.name}", args.name)
        for type_id in type_ids:  # one request each: Kafka refuses a user named twice in one request
            deletion = Deletion(name=args.name, mechanism=type_id)
            await alter(client, AlterUserScramCredentialsRequest(deletions=[deletion], upsertions=[]))
    print(f"Completed updating config for user {args.name}.")
    return 0


ACTIONS = {"list": list_users, "create": create, "delete": delete}
