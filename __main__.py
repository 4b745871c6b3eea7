"""`samsa <command>` (the script pyproject installs) and `python -m samsa <command>`: which part of
Samsa runs each command, each imported only when its command is asked for.

    serve, format    the broker (server/main.py)
    pipeline         a data pipeline on Spark (pipelines/, the `pipeline` extra)
    anything else    a tool command of cli/ (their exit codes are cli/'s)

A broker's start imports no tool command (their imports cost 0.2 s of 1 s with 10,000 partitions);
the tools' parsers are built only for a tool, or for --help and a usage error.
"""

from __future__ import annotations

import argparse
import sys

BROKER_COMMANDS = ("serve", "format", "pipeline")


def parse_args(argv: list[str]) -> argparse.Namespace:
    from .server import main as broker

    parser = argparse.ArgumentParser(prog="samsa", description="Samsa: a Kafka-compatible broker")
    commands = parser.add_subparsers(dest="command", required=True)
    broker.add_arguments(commands)
    pipeline = commands.add_parser("pipeline", help="run a data pipeline on Spark (pipelines/)", add_help=False)
    pipeline.add_argument("name", choices=["clicks"])
    pipeline.add_argument("args", nargs=argparse.REMAINDER, help="the pipeline's own options (--help lists them)")
    if not argv or argv[0] not in BROKER_COMMANDS:
        from . import cli

        cli.add_parsers(commands)
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    if args.command == "pipeline":
        from .pipelines.clicks import main as clicks

        return clicks(args.args)
    if args.command in BROKER_COMMANDS:
        from .server import main as broker

        return broker.run(args)
    from . import cli

    return cli.run(args)


if __name__ == "__main__":
    sys.exit(main())
