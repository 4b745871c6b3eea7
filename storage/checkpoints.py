"""Kafka's small metadata files in a log directory, byte for byte as Kafka writes them.

- Offset checkpoints (recovery-point-offset-checkpoint, log-start-offset-checkpoint,
  replication-offset-checkpoint): a version line `0`, a count line, then `topic partition offset`.
- leader-epoch-checkpoint in each partition directory: the same frame with `epoch startOffset`.
- meta.properties: Java properties naming the cluster and this node.

Every write is atomic (durability.write_atomically): a crash leaves the old file or the new one.
"""

from __future__ import annotations

import base64
import time
import uuid
from collections.abc import Iterable, Mapping
from pathlib import Path

from .durability import write_atomically

CHECKPOINT_VERSION = 0
META_PROPERTIES = "meta.properties"


def _write_checkpoint(path: Path, lines: list[str]) -> None:
    write_atomically(path, "".join(f"{line}\n" for line in [str(CHECKPOINT_VERSION), str(len(lines)), *lines]))


def _read_checkpoint(path: Path, fields: int) -> list[list[str]]:
    """The entry lines split in `fields` parts; none when the file does not exist or is empty (Kafka
    creates cleaner-offset-checkpoint empty), ValueError when it is malformed."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        return []
    if not lines:
        return []
    if len(lines) < 2:
        raise ValueError(f"Malformed checkpoint file {path}: missing version or count line")
    if lines[0].strip() != str(CHECKPOINT_VERSION):
        raise ValueError(f"Unrecognized version of the checkpoint file ({path}): {lines[0]!r}")
    expected = int(lines[1].strip())
    entries = [line.split() for line in lines[2:] if line.strip()]
    if len(entries) != expected or any(len(entry) != fields for entry in entries):
        raise ValueError(f"Expected {expected} entries in checkpoint file ({path}), but found {len(entries)}")
    return entries


class OffsetCheckpointFile:
    """(topic, partition) -> offset, one file per log directory."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def write(self, offsets: Mapping[tuple[str, int], int]) -> None:
        lines = [f"{topic} {partition} {offset}" for (topic, partition), offset in offsets.items()]
        _write_checkpoint(self.path, lines)

    def read(self) -> dict[tuple[str, int], int]:
        try:
            return {(topic, int(partition)): int(offset) for topic, partition, offset in _read_checkpoint(self.path, 3)}
        except ValueError as e:
            raise ValueError(f"Malformed line in checkpoint file ({self.path}): {e}") from None


class LeaderEpochCheckpointFile:
    """The (epoch, start offset) pairs of a partition's leader epoch cache."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def write(self, entries: Iterable[tuple[int, int]]) -> None:
        _write_checkpoint(self.path, [f"{epoch} {start_offset}" for epoch, start_offset in entries])

    def read(self) -> list[tuple[int, int]]:
        try:
            return [(int(epoch), int(start)) for epoch, start in _read_checkpoint(self.path, 2)]
        except ValueError as e:
            raise ValueError(f"Malformed line in checkpoint file ({self.path}): {e}") from None


def new_directory_id() -> str:
    """A random Kafka Uuid in URL-safe base64 without padding, as directory.id holds."""
    return kafka_uuid_string(uuid.uuid4())


def kafka_uuid_string(value: uuid.UUID) -> str:
    """Kafka's Uuid.toString: URL-safe base64 without padding."""
    return base64.urlsafe_b64encode(value.bytes).decode().rstrip("=")


def parse_kafka_uuid(text: str) -> uuid.UUID:
    """Kafka's Uuid.fromString; ValueError for anything else."""
    try:
        raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    except (ValueError, TypeError) as e:
        raise ValueError(f"{text!r} is not a Kafka Uuid: {e}") from None
    if len(raw) != 16:
        raise ValueError(f"{text!r} is not a Kafka Uuid: {len(raw)} bytes")
    return uuid.UUID(bytes=raw)


class PartitionMetadataFile:
    """A partition directory's `partition.metadata`: the id of the topic the log belongs to, so a
    log left behind by a deleted topic is never taken for a new topic of the same name (Kafka's
    PartitionMetadataFile: `version: 0` and `topic_id: <Uuid>` lines)."""

    NAME = "partition.metadata"
    VERSION = 0

    def __init__(self, directory: Path) -> None:
        self.path = directory / self.NAME

    def read(self) -> uuid.UUID | None:
        """The topic id; None when there is no file; ValueError for a malformed one."""
        try:
            lines = self.path.read_text(encoding="utf-8").splitlines()
        except FileNotFoundError:
            return None
        fields = dict(line.split(": ", 1) for line in lines if ": " in line)
        if fields.get("version") != str(self.VERSION) or "topic_id" not in fields:
            raise ValueError(f"Unrecognized version of partition metadata file {self.path}: {lines[:1]}")
        return parse_kafka_uuid(fields["topic_id"].strip())

    def write(self, topic_id: uuid.UUID) -> None:
        write_atomically(self.path, f"version: {self.VERSION}\ntopic_id: {kafka_uuid_string(topic_id)}")


def read_properties(path: Path) -> dict[str, str] | None:
    """A Java properties file with `key=value` lines (`#`/`!` comments); None if missing."""
    try:
        text = path.read_text(encoding="latin-1")
    except FileNotFoundError:
        return None
    props = {}
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line[0] in "#!":
            continue
        key, value = _split_entry(line)
        props[_unescape(key.strip())] = _unescape(value.strip())
    return props


def _split_entry(line: str) -> tuple[str, str]:
    """At the first `=` or `:` that is not escaped."""
    i = 0
    while i < len(line):
        if line[i] == "\\":
            i += 2
            continue
        if line[i] in "=:":
            return line[:i], line[i + 1:]
        i += 1
    return line, ""


def write_properties(path: Path, props: Mapping[str, str]) -> None:
    """Written the way java.util.Properties.store does: a blank comment, a date comment, entries."""
    stamp = time.strftime("%a %b %d %H:%M:%S %Z %Y")
    body = "".join(f"{_escape(k)}={_escape(v)}\n" for k, v in props.items())
    write_atomically(path, f"#\n#{stamp}\n{body}")


def _escape(text: str) -> str:
    return "".join("\\" + c if c in "\\=:#!" else c for c in text)


def _unescape(text: str) -> str:
    out, chars = [], iter(text)
    for c in chars:
        out.append(next(chars, "") if c == "\\" else c)
    return "".join(out)
