"""`samsa <command>`: the tool for people who run a Kafka-compatible cluster without a JVM, in one
command (as Redpanda's rpk serves Redpanda). It talks to any Kafka-compatible broker through
Samsa's own wire/ codec.

Each subcommand is a module of this package that defines `HELP` (one line), `add_arguments(parser)`
and `run(args) -> int`; the `samsa` command (the package's __main__.py) finds them here, so a new
command needs no other edit.

Exit codes, the same for every command: 0 done, 1 the broker said no (the error code's name and
message on one line), 2 bad usage (argparse's own, an unreadable properties file, a broker that
cannot be reached).
"""

from __future__ import annotations

import argparse
import pkgutil
import sys
from functools import cache
from importlib import import_module
from types import ModuleType

DONE, BROKER_REFUSED, BAD_USAGE = 0, 1, 2


class CommandError(Exception):
    """Ends a command with a one-line message on stderr and an exit code (never a traceback)."""

    def __init__(self, message: str, exit_code: int = BROKER_REFUSED) -> None:
        super().__init__(message)
        self.exit_code = exit_code


@cache
def commands() -> dict[str, ModuleType]:
    """The subcommand modules by command name (a module's name with '_' as '-': dump_log is dump-log)."""
    found = {}
    for info in pkgutil.iter_modules(__path__):
        module = import_module(f"{__name__}.{info.name}")
        if hasattr(module, "add_arguments") and hasattr(module, "run"):
            found[info.name.replace("_", "-")] = module
    return found


def add_parsers(subparsers) -> None:
    """A parser for each command, added to the `samsa` command's subparsers."""
    for name, module in commands().items():
        module.add_arguments(subparsers.add_parser(name, help=module.HELP, description=module.HELP))


def run(args: argparse.Namespace) -> int:
    """The parsed command's exit code; a CommandError's message on one line of stderr."""
    try:
        return commands()[args.command].run(args)
    except CommandError as e:
        print(f"samsa {args.command}: {e}", file=sys.stderr)
        return e.exit_code
    except KeyboardInterrupt:
        return 130
