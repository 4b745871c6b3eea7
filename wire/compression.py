"""The codecs Kafka compresses record data with, byte-compatible with what Java clients and
librdkafka write, and refusing to inflate past a size limit.

Every decompressor streams its output in bounded steps and stops as soon as the output would pass
`max_size`, so a small hostile input never costs more than about `max_size` of memory. Any failure
of the underlying libraries surfaces as DecompressionError.

Formats, as Kafka's Java client reads and writes them:
  gzip    RFC 1952 members (GZIPInputStream reads concatenated members, ignores trailing junk).
  snappy  xerial's block framing (SnappyOutputStream): 8-byte magic b"\\x82SNAPPY\\x00", int32 version,
          int32 compatible version, then blocks of int32 length + raw snappy. Data without the magic
          is a single raw snappy block, which xerial's SnappyInputStream accepts too.
  lz4     an LZ4 frame with independent 64 KiB blocks and no content size (KafkaLZ4BlockOutputStream).
          Messages of magic 0 carry a header checksum computed over the wrong bytes (the frame magic
          was included); Kafka ignores that checksum when reading magic 0 and reproduces the mistake
          when writing it.
  zstd    zstd frames, possibly several and possibly without a content size (zstd-jni streams).
"""

from __future__ import annotations

import zlib
from enum import IntEnum

import lz4.frame as _lz4
import snappy as _snappy
import zstandard as _zstd

from .codec import read_uvarint
from .exceptions import CodecError, DecompressionError

# Generous for real producers (a 1 MB batch would need a 64:1 ratio to reach it), small enough that
# a hostile batch cannot exhaust the broker.
DEFAULT_MAX_DECOMPRESSED = 64 * 1024 * 1024


class CompressionType(IntEnum):
    """The codec id in the low three attribute bits of a batch or legacy message."""

    NONE = 0
    GZIP = 1
    SNAPPY = 2
    LZ4 = 3
    ZSTD = 4

    @property
    def client_name(self) -> str:
        """The producer's `compression.type` value: none, gzip, snappy, lz4, zstd."""
        return self.name.lower()

    @property
    def topic_config_name(self) -> str:
        """The topic/broker `compression.type` value, where NONE is spelled "uncompressed"."""
        return "uncompressed" if self is CompressionType.NONE else self.name.lower()

    @classmethod
    def for_name(cls, name: str) -> CompressionType:
        """The codec a producer-side name stands for ("none", "gzip", ...)."""
        try:
            return _BY_CLIENT_NAME[name]
        except KeyError:
            raise ValueError(f"unknown compression type {name!r}") from None


_BY_CLIENT_NAME = {codec.client_name: codec for codec in CompressionType}

# Kafka's defaults for compression.gzip.level, compression.lz4.level, compression.zstd.level.
DEFAULT_LEVELS = {CompressionType.GZIP: zlib.Z_DEFAULT_COMPRESSION, CompressionType.LZ4: 9, CompressionType.ZSTD: 3}

XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_HEADER = XERIAL_MAGIC + (1).to_bytes(4, "big") + (1).to_bytes(4, "big")
_XERIAL_HEADER_SIZE = len(_XERIAL_HEADER)  # 16
_XERIAL_BLOCK_SIZE = 32 * 1024  # SnappyOutputStream's default
_LZ4_FRAME_MAGIC = b"\x04\x22\x4d\x18"
_LZ4_CONTENT_SIZE_FLAG = 0x08
_GZIP_MAGIC = b"\x1f\x8b"
_GZIP_WBITS = 31  # zlib's "gzip wrapper only"
# Output is pulled in steps of this size, so no library pre-allocates up to the whole limit.
_STEP = 256 * 1024
# A zstd RLE block turns 4 input bytes into 128 KiB, the codec's highest possible ratio; feeding
# input in slices sized by it bounds each step's output (zstandard's decompressobj has no limit).
_ZSTD_MAX_RATIO = 32 * 1024
_ZSTD_MIN_FEED = 64


def compress(codec: int, data: bytes, *, level: int | None = None, legacy_lz4_checksum: bool = False) -> bytes:
    """Compress `data` as Kafka's Java client would for `codec`. `level` defaults to Kafka's.

    `legacy_lz4_checksum` writes the faulty LZ4 header checksum that magic 0 messages carry.
    """
    codec = CompressionType(codec)
    if level is None:
        level = DEFAULT_LEVELS.get(codec, 0)  # 0 for snappy and none, which take no level
    if codec is CompressionType.GZIP:
        compressor = zlib.compressobj(level, zlib.DEFLATED, _GZIP_WBITS)
        return compressor.compress(data) + compressor.flush()
    if codec is CompressionType.SNAPPY:
        return _xerial_compress(data)
    if codec is CompressionType.LZ4:
        frame = _lz4.compress(
            data,
            compression_level=level,
            block_size=_lz4.BLOCKSIZE_MAX64KB,
            block_linked=False,
            content_checksum=False,
            store_size=False,
        )
        return _with_legacy_lz4_checksum(frame) if legacy_lz4_checksum else frame
    if codec is CompressionType.ZSTD:
        return _zstd.ZstdCompressor(level=level).compress(data)
    return bytes(data)


def decompress(codec: int, data: bytes | memoryview, max_size: int = DEFAULT_MAX_DECOMPRESSED, *,
               legacy_lz4_checksum: bool = False) -> bytes:
    """Inflate `data`; DecompressionError if it is corrupt or would inflate past `max_size` bytes.

    `legacy_lz4_checksum` accepts any LZ4 header checksum, as Kafka does for magic 0 messages.
    """
    try:
        codec = CompressionType(codec)
    except ValueError:
        raise DecompressionError(f"unknown compression codec {codec}") from None
    if codec is CompressionType.GZIP:
        return _gunzip(data, max_size)
    if codec is CompressionType.SNAPPY:
        return _snappy_decompress(data, max_size)
    if codec is CompressionType.LZ4:
        return _lz4_decompress(data, max_size, legacy_lz4_checksum)
    if codec is CompressionType.ZSTD:
        return _zstd_decompress(data, max_size)
    if len(data) > max_size:
        raise _too_large(max_size)
    return bytes(data)


def _too_large(max_size: int) -> DecompressionError:
    return DecompressionError(f"compressed data inflates past the {max_size}-byte limit")


class _BoundedOutput:
    """Collects decompressed pieces, refusing the one that takes the total past the limit."""

    __slots__ = ("pieces", "room", "_max_size")

    def __init__(self, max_size: int) -> None:
        self.pieces: list[bytes] = []
        self.room = max_size
        self._max_size = max_size

    def ensure_room(self, size: int) -> None:
        if size > self.room:
            raise _too_large(self._max_size)

    def add(self, piece: bytes) -> None:
        self.ensure_room(len(piece))
        self.room -= len(piece)
        self.pieces.append(piece)

    def result(self) -> bytes:
        return b"".join(self.pieces)


def _gunzip(data: bytes | memoryview, max_size: int) -> bytes:
    out = _BoundedOutput(max_size)
    rest = bytes(data)
    if not rest:
        raise DecompressionError("gzip data is empty")
    while True:
        inflater = zlib.decompressobj(_GZIP_WBITS)
        try:
            # One byte past the room tells "exactly full" from "overflowing".
            out.add(inflater.decompress(rest, out.room + 1))
        except zlib.error as exc:
            raise DecompressionError(f"corrupt gzip data: {exc}") from None
        if not inflater.eof:
            raise DecompressionError("gzip data is truncated")
        rest = inflater.unused_data
        # Like GZIPInputStream: another member may follow; anything else after a member is ignored.
        if not rest.startswith(_GZIP_MAGIC):
            return out.result()


def _xerial_compress(data: bytes) -> bytes:
    view = memoryview(data)
    parts = [_XERIAL_HEADER]
    for start in range(0, len(view), _XERIAL_BLOCK_SIZE):
        block = _snappy.compress(bytes(view[start:start + _XERIAL_BLOCK_SIZE]))
        parts.append(len(block).to_bytes(4, "big"))
        parts.append(block)
    return b"".join(parts)


def _snappy_decompress(view: bytes | memoryview, max_size: int) -> bytes:
    data = bytes(view)
    out = _BoundedOutput(max_size)
    if not data.startswith(XERIAL_MAGIC):
        _add_raw_snappy_block(data, out)
        return out.result()
    if len(data) < _XERIAL_HEADER_SIZE:
        raise DecompressionError("xerial snappy header is truncated")
    pos = _XERIAL_HEADER_SIZE
    end = len(data)
    while pos < end:
        if end - pos < 4:
            raise DecompressionError("xerial snappy block length is truncated")
        block_size = int.from_bytes(data[pos:pos + 4], "big", signed=True)
        pos += 4
        if block_size < 0 or pos + block_size > end:
            raise DecompressionError(f"xerial snappy block of {block_size} bytes does not fit the data")
        _add_raw_snappy_block(data[pos:pos + block_size], out)
        pos += block_size
    return out.result()


def _add_raw_snappy_block(block: bytes, out: _BoundedOutput) -> None:
    """A raw snappy block opens with its uncompressed length, so a bomb is refused before inflating."""
    declared = _snappy_declared_length(block)
    out.ensure_room(declared)
    try:
        inflated = _snappy.decompress(block)
    except Exception as exc:  # python-snappy raises its own UncompressError, or cramjam's errors
        raise DecompressionError(f"corrupt snappy data: {exc!r}") from None
    if len(inflated) != declared:
        raise DecompressionError("snappy data inflates to a different length than it declares")
    out.add(inflated)


def _snappy_declared_length(block: bytes) -> int:
    """The unsigned varint (at most 32 bits) that starts a raw snappy block."""
    try:
        return read_uvarint(block, 0)[0]
    except (IndexError, CodecError):
        raise DecompressionError("snappy length preamble is truncated or too long") from None


def _lz4_decompress(data: bytes | memoryview, max_size: int, legacy_checksum: bool) -> bytes:
    if legacy_checksum:
        data = _with_correct_lz4_checksum(bytes(data))
    out = _BoundedOutput(max_size)
    inflater = _lz4.LZ4FrameDecompressor()
    try:
        piece = inflater.decompress(data, max_length=min(_STEP, out.room + 1))
        while True:
            out.add(piece)
            if inflater.eof:
                # KafkaLZ4BlockInputStream stops at the end mark and ignores what follows.
                return out.result()
            if inflater.needs_input:
                raise DecompressionError("lz4 frame is truncated")
            piece = inflater.decompress(b"", max_length=min(_STEP, out.room + 1))
    except RuntimeError as exc:  # the lz4 binding reports every frame error as RuntimeError
        raise DecompressionError(f"corrupt lz4 data: {exc}") from None


def _lz4_descriptor_end(frame: bytes) -> int:
    """Position of the header checksum byte: after magic, FLG, BD and the optional content size."""
    if len(frame) < 7 or frame[:4] != _LZ4_FRAME_MAGIC:
        raise DecompressionError("not an lz4 frame")
    end = 6 + (8 if frame[4] & _LZ4_CONTENT_SIZE_FLAG else 0)
    if len(frame) <= end:
        raise DecompressionError("lz4 frame header is truncated")
    return end


def _with_correct_lz4_checksum(frame: bytes) -> bytes:
    end = _lz4_descriptor_end(frame)
    checksum = (xxh32(frame[4:end]) >> 8) & 0xFF
    return frame[:end] + bytes((checksum,)) + frame[end + 1:]


def _with_legacy_lz4_checksum(frame: bytes) -> bytes:
    end = _lz4_descriptor_end(frame)
    checksum = (xxh32(frame[:end]) >> 8) & 0xFF
    return frame[:end] + bytes((checksum,)) + frame[end + 1:]


_XXH_PRIME1 = 2654435761
_XXH_PRIME2 = 2246822519
_XXH_PRIME3 = 3266489917
_XXH_PRIME4 = 668265263
_XXH_PRIME5 = 374761393
_MASK32 = 0xFFFFFFFF


def _rotl32(value: int, bits: int) -> int:
    return ((value << bits) | (value >> (32 - bits))) & _MASK32


def xxh32(data: bytes, seed: int = 0) -> int:
    """XXH32 of fewer than 16 bytes: all an LZ4 frame descriptor needs, so the long-input lanes
    of the algorithm are left out."""
    length = len(data)
    if length >= 16:
        raise ValueError("xxh32 here handles inputs shorter than 16 bytes only")
    acc = (seed + _XXH_PRIME5 + length) & _MASK32
    pos = 0
    while pos + 4 <= length:
        word = int.from_bytes(data[pos:pos + 4], "little")
        acc = (_rotl32((acc + word * _XXH_PRIME3) & _MASK32, 17) * _XXH_PRIME4) & _MASK32
        pos += 4
    for byte in data[pos:]:
        acc = (_rotl32((acc + byte * _XXH_PRIME5) & _MASK32, 11) * _XXH_PRIME1) & _MASK32
    acc ^= acc >> 15
    acc = (acc * _XXH_PRIME2) & _MASK32
    acc ^= acc >> 13
    acc = (acc * _XXH_PRIME3) & _MASK32
    acc ^= acc >> 16
    return acc


def _zstd_decompress(data: bytes | memoryview, max_size: int) -> bytes:
    view = memoryview(bytes(data))
    if not view:
        raise DecompressionError("zstd data is empty")
    out = _BoundedOutput(max_size)
    decompressor = _zstd.ZstdDecompressor()
    pos = 0
    end = len(view)
    try:
        while pos < end:  # one zstd frame per turn; zstd-jni reads concatenated frames
            inflater = decompressor.decompressobj()
            declared = _zstd.get_frame_parameters(view[pos:]).content_size
            if declared != _zstd.CONTENTSIZE_UNKNOWN:
                # libzstd holds a frame to the size it declares, so the whole frame can go at once.
                out.ensure_room(declared)
            while not inflater.eof:
                if pos >= end:
                    raise DecompressionError("zstd frame is truncated")
                if declared != _zstd.CONTENTSIZE_UNKNOWN:
                    feed = end - pos
                else:
                    feed = max(_ZSTD_MIN_FEED, out.room // _ZSTD_MAX_RATIO)
                out.add(inflater.decompress(view[pos:pos + feed]))
                pos += feed
            pos = min(pos, end) - len(inflater.unused_data)
    except _zstd.ZstdError as exc:
        raise DecompressionError(f"corrupt zstd data: {exc}") from None
    return out.result()
