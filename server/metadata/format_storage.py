"""`samsa format`: Kafka's `kafka-storage format` for one broker.

Writes meta.properties in every log directory and, with `--add-scram`, the first SCRAM users into
the metadata image (Kafka writes them as bootstrap records of the metadata log), so that a broker
whose listeners all need SASL/SCRAM can be logged into from its first start:

    samsa format server.properties --add-scram 'SCRAM-SHA-512=[name=admin,password=admin-secret]'

A directory already formatted stops the command, unless `--ignore-formatted` skips it, as in Kafka.

The broker of a KRaft cluster (process.roles=broker) is formatted as Kafka's `kafka-storage format`
formats one (`format_kraft_broker`): the cluster id is required, each log dir gets meta.properties
version 1 (node.id, directory.id, version, cluster.id) and nothing else; the bootstrap metadata
(release version, features, SCRAM users) is the controllers' to write.
"""

from __future__ import annotations

import re
from pathlib import Path

from ...client.scram import ScramMechanism
from ...coordinator.feature_control import METADATA_VERSIONS, MetadataVersion
from ...storage.checkpoints import META_PROPERTIES
from ...storage.errors import KafkaStorageException
from ...storage.log_manager import LogManager
from .image import MetadataImage
from ..security.scram import ScramCredential

DEFAULT_ITERATIONS = 4096  # ScramParser's default
_SCRAM_SPEC = re.compile(r"(?P<mechanism>[A-Z0-9-]+)=\[(?P<fields>.*)\]")


class FormatError(Exception):
    pass


def _unquote(value: str) -> str:
    return value[1:-1] if len(value) >= 2 and value[0] == value[-1] == '"' else value


def parse_scram(spec: str) -> tuple[str, ScramMechanism, ScramCredential]:
    """`SCRAM-SHA-256=[name=alice,password=alice-secret(,iterations=8192)]`, as kafka-storage's
    --add-scram takes it; values may be in double quotes."""
    match = _SCRAM_SPEC.fullmatch(spec.strip())
    mechanism = ScramMechanism.from_name(match["mechanism"]) if match else None
    if match is None or mechanism is None:
        raise FormatError(f"Invalid --add-scram {spec!r}: expected SCRAM-SHA-256=[name=...,password=...] "
                          "or SCRAM-SHA-512=[...]")
    fields = {}
    for item in re.findall(r'(?:[^,"]|"[^"]*")+', match["fields"]):
        key, separator, value = item.partition("=")
        if not separator:
            raise FormatError(f"Invalid --add-scram {spec!r}: {item!r} is not key=value")
        fields[key.strip().lower()] = _unquote(value.strip())
    if not fields.get("name") or "password" not in fields:
        raise FormatError(f"Invalid --add-scram {spec!r}: name and password are required")
    try:
        iterations = int(fields.get("iterations", DEFAULT_ITERATIONS))
    except ValueError:
        raise FormatError(f"Invalid --add-scram {spec!r}: iterations must be a number") from None
    if not mechanism.min_iterations <= iterations <= 16384:
        raise FormatError(f"Invalid --add-scram {spec!r}: iterations must be {mechanism.min_iterations}..16384")
    return fields["name"], mechanism, ScramCredential.from_password(mechanism, fields["password"], iterations)


ALL_FORMATTED = "All of the log directories are already formatted."


def _write_meta_properties(config, cluster_id: str, ignore_formatted: bool) -> tuple[list[Path], list[Path], str] | None:
    """meta.properties in every log dir not formatted yet (kafka-storage format's checks): the log
    dirs, those already formatted, and the cluster id they now carry; None if all were formatted."""
    log_dirs = [Path(d).resolve() for d in config.log_dirs]
    formatted = [d for d in log_dirs if (d / META_PROPERTIES).exists()]
    if formatted and not ignore_formatted:
        raise FormatError(f"Log directory {formatted[0]} is already formatted. Use --ignore-formatted to ignore "
                          "this directory and format the others.")
    if len(formatted) == len(log_dirs):
        return None
    manager = LogManager(log_dirs, config.log_config(), lambda: 0)
    try:
        cluster_id = manager.ensure_meta_properties(config.node_id, lambda: cluster_id)
    except KafkaStorageException as error:  # another node's or cluster's directories
        raise FormatError(str(error)) from None
    return log_dirs, formatted, cluster_id


def format_storage(config, cluster_id: str, scram: list[str], ignore_formatted: bool) -> list[str]:
    """Format the log directories; returns what was done, a line each. FormatError when refused."""
    users = [parse_scram(spec) for spec in scram]
    written = _write_meta_properties(config, cluster_id, ignore_formatted)
    if written is None:
        return [ALL_FORMATTED]
    log_dirs, formatted, cluster_id = written
    done = [f"Formatting {d} with cluster id {cluster_id}." for d in log_dirs if d not in formatted]
    if users and log_dirs[0] not in formatted:
        image = MetadataImage.load(log_dirs[0], cluster_id)
        credentials = {user: dict(mechanisms) for user, mechanisms in image.scram_credentials.items()}
        for user, mechanism, credential in users:
            credentials.setdefault(user, {})[mechanism.mechanism_name] = credential.to_json()
        image.set_scram_credentials(credentials)
        done += [f"Added SCRAM credential for {user} ({mechanism.mechanism_name})." for user, mechanism, _ in users]
    return done


# Kafka 4.4's MetadataVersion.LATEST_PRODUCTION, what `kafka-storage format` formats with by default.
LATEST_PRODUCTION_METADATA_VERSION = METADATA_VERSIONS[33]


def release_metadata_version(release: str) -> MetadataVersion:
    """Kafka's MetadataVersion.fromVersionString: "4.4-IV2", or "4.4" for that release's last."""
    matching = [mv for mv in METADATA_VERSIONS.values() if release in (mv.version, mv.release)]
    if not matching:
        raise FormatError(f"Unknown release version '{release}'. Supported versions are: "
                          f"{METADATA_VERSIONS[7].version} to {LATEST_PRODUCTION_METADATA_VERSION.version}")
    return max(matching, key=lambda mv: mv.level)


def format_kraft_broker(config, cluster_id: str | None, release: str | None, features: list[str],
                        ignore_formatted: bool, controller_option: str | None = None) -> list[str]:
    """kafka-storage format for a broker-only KRaft node (Kafka's Formatter): meta.properties in
    every log dir, the first being the metadata log dir. Returns what was done, a line each."""
    if controller_option is not None:
        raise FormatError(f"{controller_option} formats a KRaft controller; Samsa runs only the broker role "
                          "(process.roles=broker): format the controllers with Kafka's kafka-storage.sh")
    if not cluster_id:
        raise FormatError("You must specify the cluster id.")
    version = release_metadata_version(release) if release else LATEST_PRODUCTION_METADATA_VERSION
    for feature in features:
        name, separator, level = feature.partition("=")
        if not separator or not level.strip().isdigit():
            raise FormatError(f"Can't parse feature={feature}. The format is <feature>=<version>.")
    written = _write_meta_properties(config, cluster_id, ignore_formatted)
    if written is None:
        return [ALL_FORMATTED]
    log_dirs, formatted, _ = written
    return [f"Formatting {'metadata' if d == log_dirs[0] else 'data'} directory {d} with metadata.version "
            f"{version.version}." for d in log_dirs if d not in formatted]
