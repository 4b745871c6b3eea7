"""`samsa dump-log`: a partition's files read straight from disk, printed line for line as Kafka's
kafka-dump-log.sh (DumpLogSegments) prints them, so that its output and the habits built on it
(grep, diff against a Kafka broker's files) carry over.

Each file is dumped by its suffix, as Kafka's tool does: a segment (`.log`) or a KRaft snapshot
(`.checkpoint`) batch by batch (record batches, and the messages of the legacy formats 0 and 1),
and with --deep-iteration (or --print-data-log) record by record;
the offset and time indexes (`.index`, `.timeindex`) entry by entry, checked against their segment;
producer snapshots (`.snapshot`) and transaction indexes (`.txnindex`). A record's key and value are
printed as UTF-8 text, or decoded as the internal topics' records with --offsets-decoder
(`__consumer_offsets`), --transaction-log-decoder (`__transaction_state`) or
--cluster-metadata-decoder (`__cluster_metadata`), as JSON in the shape Kafka's JSON converters give.
The problems found (index entries that do not point at their batch, offsets that skip) go to stderr
after the dump, as Kafka's tool reports them.

One addition of Samsa's: `leader-epoch-checkpoint`, which Kafka's tool ignores, is printed as its
(epoch, start offset) entries.
"""

from __future__ import annotations

import argparse
import mmap
import os
import re
import struct
import sys
import zlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple, TextIO

from ..storage.checkpoints import LeaderEpochCheckpointFile
from ..storage.errors import CorruptIndexException, CorruptSnapshotException, KafkaStorageException
from ..storage.log_segment import INDEX_FILE_SUFFIX, LOG_FILE_SUFFIX, TIME_INDEX_FILE_SUFFIX
from ..storage.offset_index import OffsetIndex
from ..storage.producer_snapshots import SNAPSHOT_FILE_SUFFIX, decode_snapshot
from ..storage.time_index import TimeIndex
from ..storage.transaction_index import ABORTED_TXN_VERSION, TXN_INDEX_FILE_SUFFIX, decode_entries
from ..wire.exceptions import CodecError
from ..wire.records import (
    BATCH_HEADER, BATCH_HEADER_SIZE, DEFAULT_MAX_DECOMPRESSED, LOG_OVERHEAD, NO_SEQUENCE, OFFSET_LENGTH, BatchHeader,
    CompressionType, Record, decode_batch, decode_records, is_crc_valid, peek_magic,
)
from ..wire.compression import decompress
from ..wire.legacy import LegacyMessage, iter_entries, unwrap
from . import BAD_USAGE, BROKER_REFUSED, CommandError
from .record_decoders import RecordDecoder, decoder_for, describe_control_record

HELP = "print segments, indexes and snapshots from a log dir as kafka-dump-log does"

SNAPSHOT_SUFFIX = ".checkpoint"  # a KRaft snapshot of __cluster_metadata (Kafka's Snapshots.SUFFIX)
BOOTSTRAP_SNAPSHOT = "bootstrap.checkpoint"
LEADER_EPOCH_CHECKPOINT = "leader-epoch-checkpoint"
_SNAPSHOT_NAME = re.compile(r"^(\d{20})-(\d{10})\.checkpoint$")
RECORD_INDENT = "|"
MAX_MESSAGE_SIZE = 5 * 1024 * 1024
MAX_BYTES = 2**31 - 1  # Integer.MAX_VALUE: the whole file
# What Kafka's FileLogInputStream needs to see a batch's size and magic.
_HEADER_UP_TO_MAGIC = 17
_MIN_RECORD_SIZE = 14  # LegacyRecord.RECORD_OVERHEAD_V0: smaller is corrupt
TIMESTAMP_TYPES = {-1: "NoTimestampType", 0: "CreateTime", 1: "LogAppendTime"}
_LEGACY_CRC = struct.Struct(">I")  # a legacy message starts with its CRC32


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("files", nargs="*", metavar="FILE", help="data and index files to dump")
    parser.add_argument("--files", dest="comma_files", metavar="FILE1,FILE2,...",
                        help="the same as FILE ..., comma-separated (kafka-dump-log's spelling)")
    parser.add_argument("--print-data-log", action="store_true",
                        help="print the records' keys and values (implied by a decoder option)")
    parser.add_argument("--deep-iteration", action="store_true",
                        help="print every record, not only batches (implied by --print-data-log)")
    parser.add_argument("--index-sanity-check", action="store_true",
                        help="only check the indexes as the broker does at startup")
    parser.add_argument("--verify-index-only", action="store_true",
                        help="check the indexes against their segments without printing their entries")
    parser.add_argument("--skip-record-metadata", action="store_true", help="print no offsets, sizes, etc. per record")
    parser.add_argument("--max-message-size", type=int, default=MAX_MESSAGE_SIZE, metavar="BYTES",
                        help="the largest batch an index entry may point at")
    parser.add_argument("--max-bytes", type=int, default=MAX_BYTES, metavar="BYTES",
                        help="read at most this many bytes of each segment")
    decoders = parser.add_mutually_exclusive_group()
    decoders.add_argument("--offsets-decoder", action="store_true",
                          help="decode the records as __consumer_offsets' (groups and offset commits)")
    decoders.add_argument("--transaction-log-decoder", action="store_true",
                          help="decode the records as __transaction_state's")
    decoders.add_argument("--cluster-metadata-decoder", action="store_true",
                          help="decode the records as __cluster_metadata's (KRaft metadata records)")


class Problems:
    """What the dump found wrong, by file, reported on stderr once every file is dumped."""

    def __init__(self) -> None:
        self.index_mismatches: dict[str, list[tuple[int, int]]] = {}
        self.time_index_mismatches: dict[str, list[tuple[int, int]]] = {}
        self.out_of_order_timestamps: dict[str, list[tuple[int, int]]] = {}
        self.shallow_offsets_not_found: dict[str, list[tuple[int, int]]] = {}
        self.non_consecutive_offsets: dict[str, list[tuple[int, int]]] = {}

    def report(self, err: TextIO) -> None:
        # Each kind of problem as Kafka's tool words it: a heading naming the file, then a line per
        # pair; where Kafka prepends each pair to its list, the last found comes first.
        kinds = (
            (self.index_mismatches, "Mismatches in :", "  Index offset: {}, log offset: {}", True),
            (self.time_index_mismatches, "Found timestamp mismatch in :", "  Index timestamp: {}, log timestamp: {}",
             False),
            (self.out_of_order_timestamps, "Found out of order timestamp in :",
             "  Index timestamp: {}, Previously indexed timestamp: {}", False),
            (self.shallow_offsets_not_found, "The following indexed offsets are not found in :",
             "Indexed offset: {}, found log offset: {}", False),
            (self.non_consecutive_offsets, "Non-consecutive offsets in ", "  {} is followed by {}", True),
        )
        for found, heading, line, last_first in kinds:
            for name, pairs in found.items():
                err.write(f"{heading}{name}\n")
                for pair in reversed(pairs) if last_first else pairs:
                    err.write(line.format(*pair) + "\n")


def run(args: argparse.Namespace) -> int:
    files = list(args.files) + (args.comma_files.split(",") if args.comma_files else [])
    if not files:
        raise CommandError("no files to dump (FILE ... or --files FILE1,FILE2)", BAD_USAGE)
    for name in files:
        check_readable(Path(name))
    decoder = decoder_for(offsets=args.offsets_decoder, transactions=args.transaction_log_decoder,
                          cluster_metadata=args.cluster_metadata_decoder)
    dump = Dumper(sys.stdout, Problems(), print_data=args.print_data_log or decoder is not None,
                  deep=args.deep_iteration or args.print_data_log or decoder is not None,
                  decoder=decoder or RecordDecoder(), skip_record_metadata=args.skip_record_metadata,
                  index_sanity_only=args.index_sanity_check, verify_only=args.verify_index_only,
                  max_message_size=args.max_message_size, max_bytes=args.max_bytes)
    try:
        for name in files:
            dump.file(name)
    except (CodecError, CorruptIndexException, CorruptSnapshotException, KafkaStorageException, ValueError) as e:
        sys.stdout.flush()
        raise CommandError(str(e), BROKER_REFUSED) from None
    finally:
        sys.stdout.flush()
        dump.problems.report(sys.stderr)
    return 0


def check_readable(path: Path) -> None:
    """Refuse a file that is missing or cannot be read before anything is printed."""
    try:
        with open(path, "rb"):
            pass
    except OSError as e:
        raise CommandError(f"cannot read {path}: {e.strerror}", BAD_USAGE) from None
    if path.is_dir():
        raise CommandError(f"cannot read {path}: Is a directory", BAD_USAGE)


def absolute_name(name: str) -> str:
    """Java's File.getAbsolutePath: the name joined to the working directory, not normalized."""
    return name if os.path.isabs(name) else os.path.join(os.getcwd(), name)


def base_offset_of(path: Path) -> int:
    return int(path.name.split(".")[0])


def segment_file(path: Path, suffix: str) -> Path:
    """The file of the same segment as `path` (named by the same base offset) with this suffix."""
    return path.with_name(path.name.split(".")[0] + suffix)


def index_entries(index: OffsetIndex | TimeIndex, base_offset: int) -> Iterator:
    """An offset or time index's entries, up to the zeros of an index preallocated before a crash
    (an entry back at the base offset after the first)."""
    for slot in range(index.entries):
        entry = index.entry(slot)
        if entry.offset == base_offset and slot > 0:
            return
        yield entry


@contextmanager
def mapped(path: Path) -> Iterator[bytes | mmap.mmap]:
    """The file's bytes, mapped rather than read: a segment may be a gigabyte."""
    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        if size == 0:
            yield b""
            return
        with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as data:
            yield data


def iter_batches(data, start: int = 0, end: int | None = None) -> Iterator[tuple[int, int]]:
    """(position, size) of each whole batch from `start`, stopping at a partial tail as Kafka's
    FileLogInputStream does; a size too small to be a batch is corrupt."""
    end = len(data) if end is None else end
    position = start
    while position + _HEADER_UP_TO_MAGIC < end:
        offset, size = OFFSET_LENGTH.unpack_from(data, position)
        if size < _MIN_RECORD_SIZE:
            raise CodecError(f"Found record size {size} smaller than minimum record overhead ({_MIN_RECORD_SIZE})")
        if position > end - LOG_OVERHEAD - size:
            return
        yield position, LOG_OVERHEAD + size
        position += LOG_OVERHEAD + size


def batch_header(data, position: int) -> BatchHeader:
    return BatchHeader._make(BATCH_HEADER.unpack_from(data, position))


class LegacyEntry(NamedTuple):
    """A message of format 0 or 1 at the top of a segment (a compressed one wraps others), as
    Kafka's tool shows it: its CRC and whether the bytes still match it."""

    message: LegacyMessage
    crc: int
    valid: bool


def legacy_entry(data, position: int, size: int) -> LegacyEntry:
    crc = _LEGACY_CRC.unpack_from(data, position + LOG_OVERHEAD)[0]
    valid = zlib.crc32(data[position + LOG_OVERHEAD + _LEGACY_CRC.size:position + size]) == crc
    message = next(iter_entries(data[position:position + size]))
    return LegacyEntry(message, crc, valid)


def legacy_records(entry: LegacyEntry) -> list[tuple[LegacyMessage, int]]:
    """The messages of an entry (those inside a compressed wrapper, at their absolute offsets) with
    their CRCs."""
    wrapper = entry.message
    if wrapper.compression == CompressionType.NONE:
        return [(wrapper, entry.crc)]
    inner_set = decompress(wrapper.compression, wrapper.value or b"", DEFAULT_MAX_DECOMPRESSED,
                           legacy_lz4_checksum=wrapper.magic == 0)
    crcs = [_LEGACY_CRC.unpack_from(inner_set, position + LOG_OVERHEAD)[0]
            for position, _ in iter_batches(inner_set)]
    return list(zip(unwrap(wrapper), crcs))


def last_offset_at(data, position: int, size: int) -> int:
    if peek_magic(data, position) < 2:
        return OFFSET_LENGTH.unpack_from(data, position)[0]  # a legacy entry's offset is its last message's
    return batch_header(data, position).last_offset


def record_sequence(header: BatchHeader, record: Record) -> int:
    """DefaultRecordBatch's sequence of a record: the base sequence plus its delta, wrapping past
    Integer.MAX_VALUE to 0."""
    if header.base_sequence == NO_SEQUENCE:
        return NO_SEQUENCE
    return (header.base_sequence + record.offset_delta) & 0x7FFFFFFF


def size_of(data: bytes | None) -> int:
    return -1 if data is None else len(data)


def optional_long(value: int | None) -> str:
    return "OptionalLong.empty" if value is None else f"OptionalLong[{value}]"


@dataclass
class Dumper:
    """Prints the files to `out` and notes the problems it finds in `problems`."""

    out: TextIO
    problems: Problems
    print_data: bool
    deep: bool
    decoder: RecordDecoder
    skip_record_metadata: bool = False
    index_sanity_only: bool = False
    verify_only: bool = False
    max_message_size: int = MAX_MESSAGE_SIZE
    max_bytes: int = MAX_BYTES
    # The file being dumped as the command line names it: Kafka prints it so, not normalized.
    current: str = ""

    def file(self, name: str) -> None:
        path = Path(name)
        self.current = name
        self.out.write(f"Dumping {name}\n")
        suffix = path.suffix
        dump: Callable[[Path], None] | None = {
            LOG_FILE_SUFFIX: self.log, SNAPSHOT_SUFFIX: self.log, INDEX_FILE_SUFFIX: self.offset_index,
            TIME_INDEX_FILE_SUFFIX: self.time_index, SNAPSHOT_FILE_SUFFIX: self.producer_snapshot,
            TXN_INDEX_FILE_SUFFIX: self.txn_index,
        }.get(suffix)
        if path.name == LEADER_EPOCH_CHECKPOINT:
            dump = self.leader_epoch_checkpoint
        if dump is None:
            self.out.flush()
            sys.stderr.write(f"Ignoring unknown file {name}\n")
            return
        dump(path)

    # -- segments and KRaft snapshots -------------------------------------------------------------

    def log(self, path: Path) -> None:
        write = self.out.write
        if path.name.endswith(LOG_FILE_SUFFIX):
            write(f"Log starting offset: {base_offset_of(path)}\n")
        elif path.name == BOOTSTRAP_SNAPSHOT:
            write("KRaft bootstrap snapshot\n")
        else:
            match = _SNAPSHOT_NAME.match(path.name)
            if match is None:
                raise ValueError(f"{path.name} is not a snapshot file name (<end offset>-<epoch>.checkpoint)")
            write(f"Snapshot end offset: {int(match[1])}, epoch: {int(match[2])}\n")
        with mapped(path) as data:
            end = min(len(data), self.max_bytes)
            valid_bytes = 0
            last_offset = -1
            skipped: list[tuple[int, int]] = []
            for position, size in iter_batches(data, 0, end):
                if peek_magic(data, position) < 2:
                    entry = legacy_entry(data, position, size)
                    self.legacy_line(entry, valid_bytes, size)
                    lines = [(m.offset, self.legacy_record_line(m, crc))
                             for m, crc in legacy_records(entry)] if self.deep else []
                else:
                    header = batch_header(data, position)
                    self.batch_line(data, position, header, valid_bytes)
                    lines = [(header.base_offset + r.offset_delta, self.record_line(header, r))
                             for r in self.records(data, position, header)] if self.deep else []
                for offset, line in lines:
                    if last_offset != -1 and offset != last_offset + 1:
                        skipped.append((last_offset, offset))
                    last_offset = offset
                    write(line + "\n")
                valid_bytes += size
            if skipped:
                self.problems.non_consecutive_offsets[absolute_name(self.current)] = skipped
            trailing = len(data) - valid_bytes
            if trailing > 0 and self.max_bytes == MAX_BYTES:
                write(f"Found {trailing} invalid bytes at the end of {path.name}\n")

    def batch_line(self, data, position: int, header: BatchHeader, accumulated: int) -> None:
        delete_horizon = header.base_timestamp if header.has_delete_horizon else None
        self.out.write(
            f"baseOffset: {header.base_offset} lastOffset: {header.last_offset} count: {header.records_count} "
            f"baseSequence: {header.base_sequence} lastSequence: {header.last_sequence} "
            f"producerId: {header.producer_id} producerEpoch: {header.producer_epoch} "
            f"partitionLeaderEpoch: {header.partition_leader_epoch} "
            f"isTransactional: {str(header.is_transactional).lower()} isControl: {str(header.is_control).lower()} "
            f"deleteHorizonMs: {optional_long(delete_horizon)} position: {accumulated} "
            f"{TIMESTAMP_TYPES[header.timestamp_type]}: {header.max_timestamp} size: {header.size} "
            f"magic: {header.magic} compresscodec: {CompressionType(header.compression).name.lower()} "
            f"crc: {header.crc} isvalid: {str(header.size >= BATCH_HEADER_SIZE and is_crc_valid(data, position, header)).lower()}\n")

    def records(self, data, position: int, header: BatchHeader) -> list[Record]:
        if is_crc_valid(data, position, header):
            return decode_batch(data, position)[1]
        # Kafka reads the records of a batch that fails its CRC too: the dump is how one looks at damage.
        payload = bytes(memoryview(data)[position + BATCH_HEADER_SIZE:position + header.size])
        if header.compression != CompressionType.NONE:
            payload = decompress(header.compression, payload, DEFAULT_MAX_DECOMPRESSED)
        return decode_records(payload, header.records_count)

    def legacy_line(self, entry: LegacyEntry, accumulated: int, size: int) -> None:
        message = entry.message
        self.out.write(
            f"offset: {message.offset} position: {accumulated} {TIMESTAMP_TYPES[message.timestamp_type]}: "
            f"{message.timestamp} size: {size} magic: {message.magic} "
            f"compresscodec: {CompressionType(message.compression).name.lower()} crc: {entry.crc} "
            f"isvalid: {str(entry.valid).lower()}\n")

    def legacy_record_line(self, message: LegacyMessage, crc: int) -> str:
        prefix = f"{RECORD_INDENT} "
        parts = []
        if not self.skip_record_metadata:
            parts.append(
                f"{prefix}offset: {message.offset} {TIMESTAMP_TYPES[message.timestamp_type]}: {message.timestamp} "
                f"keySize: {size_of(message.key)} valueSize: {size_of(message.value)} isValid: true crc: {crc}")
            prefix = " "
        if self.print_data:
            parts += self.data_parts(message.offset, message, prefix)
        return "".join(parts)

    def data_parts(self, offset: int, record: Record | LegacyMessage, prefix: str) -> list[str]:
        key, payload = self.decoder.parse(offset, record)
        parts = []
        if key is not None:
            parts.append(f"{prefix}key: {key}")
            prefix = " "
        if payload is not None:
            parts.append(f"{prefix}payload: {payload}")
        return parts

    def record_line(self, header: BatchHeader, record: Record) -> str:
        parts = []
        prefix = f"{RECORD_INDENT} "
        if not self.skip_record_metadata:
            parts.append(
                f"{prefix}offset: {header.base_offset + record.offset_delta} "
                f"{TIMESTAMP_TYPES[header.timestamp_type]}: {header.record_timestamp(record)} "
                f"keySize: {size_of(record.key)} valueSize: {size_of(record.value)} "
                f"sequence: {record_sequence(header, record)} "
                f"headerKeys: [{','.join(key for key, _ in record.headers)}]")
            prefix = " "
            if header.is_control:
                parts.append(describe_control_record(record))
        if self.print_data and not header.is_control:
            parts += self.data_parts(header.base_offset + record.offset_delta, record, prefix)
        return "".join(parts)

    # -- indexes ----------------------------------------------------------------------------------

    def offset_index(self, path: Path) -> None:
        base_offset = base_offset_of(path)
        index = OffsetIndex(path, base_offset, max_index_size=path.stat().st_size)
        if index.entries == 0:
            self.out.write(f"{self.current} is empty.\n")
            return
        log_path = segment_file(path, LOG_FILE_SUFFIX)
        if self.index_sanity_only:
            self.sanity_check(index, log_path.stat().st_size if log_path.exists() else 0)
            return
        mismatches = []
        with mapped(log_path) as data:
            for entry in index_entries(index, base_offset):
                first = next(iter_batches(data, entry.position, min(len(data), entry.position + self.max_message_size)),
                             None)
                if first is None:
                    raise CodecError(f"no batch at position {entry.position} of {log_path}")
                batch_last_offset = last_offset_at(data, *first)
                if batch_last_offset != entry.offset:
                    mismatches.append((entry.offset, batch_last_offset))
                if not self.verify_only:
                    self.out.write(f"offset: {entry.offset} position: {entry.position}\n")
        if mismatches:
            self.problems.index_mismatches[absolute_name(self.current)] = mismatches

    def time_index(self, path: Path) -> None:
        base_offset = base_offset_of(path)
        time_index = TimeIndex(path, base_offset, max_index_size=path.stat().st_size)
        index = OffsetIndex(segment_file(path, INDEX_FILE_SUFFIX), base_offset, max_index_size=0)
        if self.index_sanity_only:
            self.sanity_check(time_index, 0)
            return
        name = absolute_name(self.current)
        previous_timestamp = -1
        with mapped(segment_file(path, LOG_FILE_SUFFIX)) as data:
            for entry in index_entries(time_index, base_offset):
                position = index.lookup(entry.offset).position
                found = next(((p, size, last) for p, size in iter_batches(data, position)
                              if (last := last_offset_at(data, p, size)) >= entry.offset), None)
                if found is None:
                    self.problems.shallow_offsets_not_found.setdefault(name, []).append((entry.offset, -1))
                elif found[2] != entry.offset:
                    self.problems.shallow_offsets_not_found.setdefault(name, []).append((entry.offset, found[2]))
                else:
                    max_timestamp = max(self.record_timestamps(data, found[0], found[1]), default=-1)
                    max_timestamp = max(max_timestamp, -1)
                    if max_timestamp != entry.timestamp:
                        self.problems.time_index_mismatches.setdefault(name, []).append((entry.timestamp, max_timestamp))
                    if previous_timestamp >= entry.timestamp:
                        self.problems.out_of_order_timestamps.setdefault(name, []).append(
                            (entry.timestamp, previous_timestamp))
                if not self.verify_only:
                    self.out.write(f"timestamp: {entry.timestamp} offset: {entry.offset}\n")
                previous_timestamp = entry.timestamp

    def sanity_check(self, index: OffsetIndex | TimeIndex, log_size: int) -> None:
        """--index-sanity-check: the broker's startup check of an index, CorruptIndexException if it fails."""
        index.sanity_check(log_size)
        self.out.write(f"{self.current} passed sanity check.\n")

    def record_timestamps(self, data, position: int, size: int) -> list[int]:
        if peek_magic(data, position) < 2:
            return [message.timestamp for message, _ in legacy_records(legacy_entry(data, position, size))]
        header = batch_header(data, position)
        return [header.record_timestamp(r) for r in self.records(data, position, header)]

    # -- producer state, aborted transactions, leader epochs --------------------------------------

    def producer_snapshot(self, path: Path) -> None:
        try:
            entries = decode_snapshot(path.read_bytes())
        except CorruptSnapshotException as e:
            self.out.flush()
            sys.stderr.write(f"{e}\n")
            return
        for entry in entries:
            line = (f"producerId: {entry.producer_id} producerEpoch: {entry.producer_epoch} "
                    f"coordinatorEpoch: {entry.coordinator_epoch} "
                    f"currentTxnFirstOffset: {optional_long(entry.current_txn_first_offset)} "
                    f"lastTimestamp: {entry.last_timestamp} ")
            if entry.batches:
                batch = entry.batches[0]
                line += (f"firstSequence: {batch.first_seq} lastSequence: {batch.last_seq} "
                         f"lastOffset: {batch.last_offset} offsetDelta: {batch.offset_delta} timestamp: {batch.timestamp}")
            self.out.write(line + "\n")

    def txn_index(self, path: Path) -> None:
        for txn in decode_entries(path.read_bytes(), path):
            self.out.write(f"version: {ABORTED_TXN_VERSION} producerId: {txn.producer_id} "
                           f"firstOffset: {txn.first_offset} lastOffset: {txn.last_offset} "
                           f"lastStableOffset: {txn.last_stable_offset}\n")

    def leader_epoch_checkpoint(self, path: Path) -> None:
        for epoch, start_offset in LeaderEpochCheckpointFile(path).read():
            self.out.write(f"epoch: {epoch} startOffset: {start_offset}\n")
