"""`samsa serve [server.properties] [--override key=value ...]`: the shape of kafka-server-start.sh.

Exit codes: 0 after a clean shutdown (SIGTERM or SIGINT: stop accepting, finish requests in
flight, flush, exit), 2 for a configuration error (the message names the key), 1 for a failure.
"""

from __future__ import annotations

import argparse
import logging
import resource
import signal
import sys

import trio

from .config import ConfigError, KafkaConfig

log = logging.getLogger("samsa")


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="samsa", description="Samsa: a Kafka-compatible broker")
    commands = parser.add_subparsers(dest="command", required=True)
    serve = commands.add_parser("serve", help="run a broker")
    serve.add_argument("properties", nargs="?", help="a Kafka server.properties file")
    serve.add_argument("--override", action="append", default=[], metavar="KEY=VALUE",
                       help="set a config, overriding the properties file (repeatable)")
    serve.add_argument("--log-level", default="INFO", help="DEBUG, INFO, WARNING or ERROR (default INFO)")
    return parser.parse_args(argv)


async def serve(config: KafkaConfig) -> None:
    from .broker import Broker

    broker = Broker(config)
    with trio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
        async with trio.open_nursery() as nursery:
            await nursery.start(broker.run)
            async for signum in signals:
                log.info("received %s, shutting down", signal.Signals(signum).name)
                nursery.cancel_scope.cancel()
                break


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
    args = parse_args(sys.argv[1:] if argv is None else argv)
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
    raise_open_files_limit()
    try:
        trio.run(serve, config)
    except KeyboardInterrupt:
        pass
    except ConfigError as e:  # found while building the listeners (key stores, JAAS users, ...)
        print(f"samsa: invalid configuration: {e}", file=sys.stderr)
        return 2
    except Exception:
        log.exception("fatal error; the broker stops")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
