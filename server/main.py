"""`samsa serve [server.properties] [--override key=value ...]`: the shape of kafka-server-start.sh;
`samsa format ... [--add-scram SPEC]`: the shape of kafka-storage format (server/metadata/format_storage.py).
The `samsa` command (the package's __main__.py) hands these two here; `python -m samsa.server.main`
runs them alone.

Exit codes: 0 after a clean shutdown (SIGTERM or SIGINT: stop accepting, finish requests in
flight, flush, exit), 2 for a configuration error (the message names the key), 1 for a failure
(among them a zookeeper.connect not reachable within zookeeper.connection.timeout.ms).
"""

from __future__ import annotations

import argparse
import logging
import resource
import signal
import sys
from typing import TYPE_CHECKING

import trio

if TYPE_CHECKING:
    from .config.kafka_config import KafkaConfig

log = logging.getLogger("samsa")


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="samsa", description="Samsa: a Kafka-compatible broker")
    add_arguments(parser.add_subparsers(dest="command", required=True))
    return parser.parse_args(argv)


def add_arguments(commands) -> None:
    """The `serve` and `format` commands' parsers. Defining them imports nothing of the broker's:
    the `samsa` command builds every command's parser, a tool's too."""
    serve = commands.add_parser("serve", help="run a broker")
    serve.add_argument("properties", nargs="?", help="a Kafka server.properties file")
    serve.add_argument("--override", action="append", default=[], metavar="KEY=VALUE",
                       help="set a config, overriding the properties file (repeatable)")
    serve.add_argument("--log-level", default="INFO", help="DEBUG, INFO, WARNING or ERROR (default INFO)")
    fmt = commands.add_parser("format", help="format the log directories, optionally with SCRAM users")
    fmt.add_argument("properties", nargs="?", help="a Kafka server.properties file")
    fmt.add_argument("--override", action="append", default=[], metavar="KEY=VALUE")
    fmt.add_argument("-t", "--cluster-id", help="the cluster id (default: a new random one)")
    fmt.add_argument("-S", "--add-scram", action="append", default=[], metavar="SPEC",
                     help="a SCRAM user, e.g. 'SCRAM-SHA-256=[name=alice,password=alice-secret]' (repeatable)")
    fmt.add_argument("-g", "--ignore-formatted", action="store_true",
                     help="skip directories already formatted instead of failing")
    # kafka-storage format's options for a KRaft node (process.roles=broker: the broker of a KRaft cluster).
    fmt.add_argument("-r", "--release-version", help="the metadata.version to format with, e.g. 4.4-IV2")
    fmt.add_argument("-f", "--feature", action="append", default=[], metavar="NAME=LEVEL",
                     help="a feature level for the bootstrap metadata (a controller's; repeatable)")
    fmt.add_argument("-s", "--standalone", action="store_true", help="a controller's option; refused")
    fmt.add_argument("-I", "--initial-controllers", help="a controller's option; refused")
    fmt.add_argument("-N", "--no-initial-controllers", action="store_true", help="accepted, as Kafka does")
    fmt.set_defaults(log_level="WARNING")


async def serve(config: KafkaConfig) -> None:
    from .broker import Broker

    broker = Broker(config)
    with trio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
        async with trio.open_nursery() as nursery:
            await nursery.start(broker.run)
            async for signum in signals:
                log.info("received %s, shutting down", signal.Signals(signum).name)
                await broker.controlled_shutdown()  # in a cluster, while the broker still serves
                nursery.cancel_scope.cancel()
                break


def sole_exception(group: BaseExceptionGroup) -> BaseException:
    """The one failure trio's nurseries wrapped (each nursery a group level), or the group when
    several tasks failed."""
    leaf: BaseException = group
    while isinstance(leaf, BaseExceptionGroup) and len(leaf.exceptions) == 1:
        leaf = leaf.exceptions[0]
    return group if isinstance(leaf, BaseExceptionGroup) else leaf


def raise_open_files_limit() -> None:
    """The soft limit on open files up to the hard one, as the JVM does for Kafka (MaxFDLimit):
    every partition holds its active segment open."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != hard:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
        except (ValueError, OSError):
            pass  # an unlimited hard limit cannot be the soft one; keep what we have


def main(argv: list[str] | None = None) -> int:
    return run(parse_args(sys.argv[1:] if argv is None else argv))


def run(args: argparse.Namespace) -> int:
    """`serve` or `format`, parsed: the exit code."""
    from .config.kafka_config import ConfigError, KafkaConfig
    from .cluster_join import ClusterJoinError

    logging.basicConfig(level=args.log_level.upper(), stream=sys.stdout,
                        format="[%(asctime)s] %(levelname)s %(message)s (%(name)s)")
    try:
        config = KafkaConfig.load(args.properties, args.override)
    except ConfigError as e:
        print(f"samsa: invalid configuration: {e}", file=sys.stderr)
        return 2
    except OSError as e:
        print(f"samsa: cannot read {args.properties}: {e.strerror}", file=sys.stderr)
        return 2
    if args.command == "format":
        return format_command(config, args)
    raise_open_files_limit()
    try:
        try:
            trio.run(serve, config)
        except BaseExceptionGroup as group:
            raise sole_exception(group) from None
    except KeyboardInterrupt:
        pass
    except ConfigError as e:  # found while building the listeners (key stores, JAAS users, ...)
        print(f"samsa: invalid configuration: {e}", file=sys.stderr)
        return 2
    except ClusterJoinError as e:  # ZooKeeper unreachable, another broker with this id, another cluster's data
        log.error("Fatal error during broker startup: %s", e)
        print(f"samsa: {e}", file=sys.stderr)
        return 1
    except Exception:
        log.exception("fatal error; the broker stops")
        return 1
    return 0


def format_command(config: KafkaConfig, args: argparse.Namespace) -> int:
    from .broker import new_cluster_id
    from .metadata.format_storage import FormatError, format_kraft_broker, format_storage

    try:
        if config.kraft_broker:
            lines = format_kraft_broker(config, args.cluster_id, args.release_version, args.feature,
                                        args.ignore_formatted, controller_option=(
                                            "--standalone" if args.standalone else
                                            "--initial-controllers" if args.initial_controllers else None))
        else:
            lines = format_storage(config, args.cluster_id or new_cluster_id(), args.add_scram, args.ignore_formatted)
        for line in lines:
            print(line)
    except FormatError as e:
        print(f"samsa: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
