import gzip
import os
import tracemalloc
import zlib

import lz4.block
import lz4.frame
import pytest
import snappy
import zstandard
from kafka import codec as kafka_codec

from samsa.wire.compression import (
    DEFAULT_LEVELS, XERIAL_MAGIC, CompressionType, compress, decompress, xxh32,
)
from samsa.wire.exceptions import DecompressionError

CODECS = list(CompressionType)
COMPRESSED = [c for c in CompressionType if c is not CompressionType.NONE]
LZ4_MAGIC = b"\x04\x22\x4d\x18"
MIB = 1024 * 1024


def payloads():
    rng = os.urandom  # random data exercises incompressible (stored/literal) paths
    return [
        b"",
        b"x",
        b"hello kafka " * 1000,
        rng(70_000),  # more than one lz4 block and more than one xerial block
        bytes(range(256)) * 1024 + rng(1000),
    ]


@pytest.mark.parametrize("codec", CODECS)
def test_round_trip(codec):
    for data in payloads():
        assert decompress(codec, compress(codec, data)) == data


@pytest.mark.parametrize("codec", COMPRESSED)
def test_levels_round_trip(codec):
    data = b"level " * 5000
    for level in (1, 9):
        assert decompress(codec, compress(codec, data, level=level)) == data


def test_compression_type_names():
    assert [c.topic_config_name for c in CompressionType] == ["uncompressed", "gzip", "snappy", "lz4", "zstd"]
    assert [c.client_name for c in CompressionType] == ["none", "gzip", "snappy", "lz4", "zstd"]
    assert CompressionType.for_name("none") is CompressionType.NONE
    assert CompressionType.for_name("lz4") is CompressionType.LZ4
    with pytest.raises(ValueError):
        CompressionType.for_name("uncompressed")


def test_kafka_default_levels():
    assert DEFAULT_LEVELS == {CompressionType.GZIP: -1, CompressionType.LZ4: 9, CompressionType.ZSTD: 3}


def test_unknown_codec_is_a_decompression_error():
    with pytest.raises(DecompressionError):
        decompress(5, b"abc")


def test_uncompressed_respects_limit():
    with pytest.raises(DecompressionError):
        decompress(CompressionType.NONE, b"abcd", max_size=3)


# --- differential: kafka-python's codec implementations -------------------------------------------

KAFKA_PYTHON = {
    CompressionType.GZIP: (kafka_codec.gzip_encode, kafka_codec.gzip_decode),
    CompressionType.SNAPPY: (kafka_codec.snappy_encode, kafka_codec.snappy_decode),
    CompressionType.LZ4: (kafka_codec.lz4_encode, kafka_codec.lz4_decode),
    CompressionType.ZSTD: (kafka_codec.zstd_encode, kafka_codec.zstd_decode),
}


@pytest.mark.parametrize("codec", COMPRESSED)
def test_kafka_python_reads_ours_and_we_read_theirs(codec):
    encode, decode = KAFKA_PYTHON[codec]
    for data in payloads()[1:]:  # kafka-python's xerial detection needs more than a header
        assert decode(compress(codec, data)) == data
        assert decompress(codec, encode(data)) == data


# --- gzip ----------------------------------------------------------------------------------------

def test_gzip_reads_standard_gzip_and_concatenated_members():
    assert decompress(CompressionType.GZIP, gzip.compress(b"one")) == b"one"
    assert decompress(CompressionType.GZIP, gzip.compress(b"one") + gzip.compress(b"two")) == b"onetwo"


def test_gzip_ignores_junk_after_a_member_like_java():
    assert decompress(CompressionType.GZIP, gzip.compress(b"one") + b"\x00junk") == b"one"


def test_gzip_corruption():
    good = gzip.compress(b"payload " * 100)
    for bad in (b"", good[:10], good[:-4], b"not gzip at all", good[:12] + bytes(20) + good[32:]):
        with pytest.raises(DecompressionError):
            decompress(CompressionType.GZIP, bad)


# --- snappy (xerial framing) ---------------------------------------------------------------------

def raw_literal_block(data: bytes) -> bytes:
    """A raw snappy block written by hand: varint length, then one literal element (<= 60 bytes)."""
    assert 0 < len(data) <= 60
    return bytes((len(data),)) + bytes(((len(data) - 1) << 2,)) + data


def xerial(*blocks: bytes, version: int = 1, compatible: int = 1) -> bytes:
    out = XERIAL_MAGIC + version.to_bytes(4, "big") + compatible.to_bytes(4, "big")
    for block in blocks:
        out += len(block).to_bytes(4, "big") + block
    return out


def test_hand_built_snappy_vectors():
    assert raw_literal_block(b"hello") == b"\x05\x10hello"
    assert decompress(CompressionType.SNAPPY, b"\x05\x10hello") == b"hello"
    assert decompress(CompressionType.SNAPPY, xerial(b"\x05\x10hello")) == b"hello"
    framed = xerial(raw_literal_block(b"kafka "), raw_literal_block(b"snappy"))
    assert decompress(CompressionType.SNAPPY, framed) == b"kafka snappy"
    assert decompress(CompressionType.SNAPPY, xerial()) == b""
    # Version fields are not checked, as in kafka-python and xerial itself.
    assert decompress(CompressionType.SNAPPY, xerial(b"\x05\x10hello", version=0x01000000)) == b"hello"


def test_snappy_output_is_xerial_framed_with_32k_blocks():
    data = os.urandom(100_000)
    framed = compress(CompressionType.SNAPPY, data)
    assert framed[:16] == XERIAL_MAGIC + b"\x00\x00\x00\x01\x00\x00\x00\x01"
    pos, blocks = 16, []
    while pos < len(framed):
        size = int.from_bytes(framed[pos:pos + 4], "big")
        blocks.append(snappy.decompress(framed[pos + 4:pos + 4 + size]))
        pos += 4 + size
    assert [len(b) for b in blocks] == [32768, 32768, 32768, 1696]
    assert b"".join(blocks) == data


def test_python_snappy_framing_format_is_not_kafkas():
    """python-snappy's stream framing ("sNaPpY" chunks) is another format: Kafka never sends it."""
    framed = snappy.StreamCompressor().add_chunk(b"hello " * 10)
    assert not framed.startswith(XERIAL_MAGIC)
    with pytest.raises(DecompressionError):
        decompress(CompressionType.SNAPPY, framed)


def test_snappy_corruption():
    good = xerial(raw_literal_block(b"hello"))
    cases = [
        XERIAL_MAGIC + b"\x00\x00",  # header cut short
        good[:-1],  # block cut short
        good[:18],  # block length cut short
        xerial() + b"\xff\xff\xff\xff",  # negative block length
        xerial() + b"\x00\x00\x00\x10abc",  # block length past the end
        b"\x0a\x10hello",  # raw block declaring more than it holds
        b"\xff\xff\xff\xff\xff\xff",  # endless length varint
        b"",
    ]
    for bad in cases:
        with pytest.raises(DecompressionError):
            decompress(CompressionType.SNAPPY, bad)


# --- lz4 -----------------------------------------------------------------------------------------

def test_xxh32_known_values():
    assert xxh32(b"") == 0x02CC5D05
    assert xxh32(b"a") == 0x550D7456
    assert xxh32(b"abc") == 0x32D153FF
    # The frame descriptor checksums lz4 itself writes (2 and 10 bytes hashed) agree with ours.
    for frame, descriptor_end in ((lz4.frame.compress(b"abc", store_size=False), 6),
                                  (lz4.frame.compress(b"abc", store_size=True), 14)):
        assert frame[descriptor_end] == (xxh32(frame[4:descriptor_end]) >> 8) & 0xFF


def test_lz4_frame_header_is_what_kafka_writes():
    frame = compress(CompressionType.LZ4, b"data " * 100)
    # FLG 0x60: version 1, independent blocks, no checksums, no content size; BD 0x40: 64 KiB blocks.
    assert frame[:7] == LZ4_MAGIC + b"\x60\x40\x82"
    assert frame[-4:] == b"\x00\x00\x00\x00"  # end mark, no content checksum


def test_hand_built_lz4_frame_with_an_uncompressed_block():
    data = b"stored as is"
    block = (len(data) | 0x80000000).to_bytes(4, "little") + data
    frame = LZ4_MAGIC + b"\x60\x40\x82" + block + b"\x00\x00\x00\x00"
    assert decompress(CompressionType.LZ4, frame) == data


def test_hand_built_lz4_frame_with_a_compressed_block():
    data = b"abcabcabcabcabcabcabcabc" * 10
    raw = lz4.block.compress(data, store_size=False)
    frame = LZ4_MAGIC + b"\x60\x40\x82" + len(raw).to_bytes(4, "little") + raw + b"\x00\x00\x00\x00"
    assert decompress(CompressionType.LZ4, frame) == data


def test_lz4_accepts_other_frame_options():
    data = os.urandom(1000) * 200
    for options in (
        dict(store_size=True, content_checksum=True),
        dict(block_checksum=True),
        dict(block_size=lz4.frame.BLOCKSIZE_MAX4MB),
        dict(block_linked=True),
    ):
        assert decompress(CompressionType.LZ4, lz4.frame.compress(data, **options)) == data


def test_lz4_legacy_header_checksum_covers_the_frame_magic():
    frame = compress(CompressionType.LZ4, b"old client data", legacy_lz4_checksum=True)
    assert frame[6] == (xxh32(frame[:6]) >> 8) & 0xFF
    assert frame[6] != (xxh32(frame[4:6]) >> 8) & 0xFF
    assert decompress(CompressionType.LZ4, frame, legacy_lz4_checksum=True) == b"old client data"
    with pytest.raises(DecompressionError):
        decompress(CompressionType.LZ4, frame)
    # Kafka ignores the checksum for magic 0 entirely: a correct one is fine too.
    correct = compress(CompressionType.LZ4, b"new client data")
    assert decompress(CompressionType.LZ4, correct, legacy_lz4_checksum=True) == b"new client data"


def test_lz4_legacy_checksum_with_content_size():
    frame = bytearray(lz4.frame.compress(b"sized", store_size=True))
    frame[14] = (xxh32(bytes(frame[:14])) >> 8) & 0xFF
    assert decompress(CompressionType.LZ4, bytes(frame), legacy_lz4_checksum=True) == b"sized"


def test_lz4_corruption():
    good = compress(CompressionType.LZ4, os.urandom(200) * 50)
    cases = [b"", good[:5], good[:-4], good[:20], b"\x00" * 20, good[:7] + b"\xff\xff\xff\x7f" + good[11:]]
    for bad in cases:
        with pytest.raises(DecompressionError):
            decompress(CompressionType.LZ4, bad)
    for bad in (b"", good[:5], b"notlz4frame"):
        with pytest.raises(DecompressionError):
            decompress(CompressionType.LZ4, bad, legacy_lz4_checksum=True)


# --- zstd ----------------------------------------------------------------------------------------

def test_zstd_frames_without_content_size():
    data = b"streamed " * 10_000
    no_size = zstandard.ZstdCompressor(write_content_size=False).compress(data)
    assert zstandard.get_frame_parameters(no_size).content_size == zstandard.CONTENTSIZE_UNKNOWN
    assert decompress(CompressionType.ZSTD, no_size) == data
    streamer = zstandard.ZstdCompressor().compressobj()
    streamed = b"".join(streamer.compress(data[i:i + 1000]) for i in range(0, len(data), 1000)) + streamer.flush()
    assert decompress(CompressionType.ZSTD, streamed) == data


def test_zstd_concatenated_frames():
    one, two = zstandard.ZstdCompressor().compress(b"one"), zstandard.ZstdCompressor().compress(b"two")
    assert decompress(CompressionType.ZSTD, one + two) == b"onetwo"


def test_zstd_declared_content_size_is_checked_before_inflating():
    sized = zstandard.ZstdCompressor().compress(bytes(8 * MIB))
    with pytest.raises(DecompressionError, match=f"{MIB}-byte limit"):
        decompress(CompressionType.ZSTD, sized, max_size=MIB)
    lying = bytearray(zstandard.ZstdCompressor().compress(b"a" * 1000))
    lying[5:7] = (0).to_bytes(2, "little")  # single-segment frame now claims 256 bytes
    with pytest.raises(DecompressionError):
        decompress(CompressionType.ZSTD, bytes(lying), max_size=300)


def test_zstd_corruption():
    good = zstandard.ZstdCompressor(write_content_size=False).compress(b"hello world " * 1000)
    for bad in (b"", good[:3], good[:-5], good[: len(good) // 2], b"\x00" * 20, good + b"junk!"):
        with pytest.raises(DecompressionError):
            decompress(CompressionType.ZSTD, bad)


# --- decompression bombs -------------------------------------------------------------------------
# Each bomb inflates to 100 MiB at about the codec's highest ratio: zstd ~3 KB, gzip and lz4
# ~100-400 KB, snappy a raw block claiming 100 MiB or a xerial stream of 3200 full blocks.

BOMB_SIZE = 100 * MIB
ZEROS_MIB = bytes(MIB)


def gzip_bomb() -> bytes:
    member = gzip.compress(ZEROS_MIB, compresslevel=9)
    return member * 100  # concatenated members, as GZIPInputStream reads them


def gzip_single_member_bomb() -> bytes:
    deflater = zlib.compressobj(9, zlib.DEFLATED, 31)
    return b"".join(deflater.compress(ZEROS_MIB) for _ in range(100)) + deflater.flush()


def zstd_bomb() -> bytes:
    streamer = zstandard.ZstdCompressor(level=3).compressobj()  # no content size in the frame
    return b"".join(streamer.compress(ZEROS_MIB) for _ in range(100)) + streamer.flush()


def lz4_bomb() -> bytes:
    block = lz4.block.compress(bytes(64 * 1024), store_size=False)
    blocks = (len(block).to_bytes(4, "little") + block) * (BOMB_SIZE // (64 * 1024))
    return LZ4_MAGIC + b"\x60\x40\x82" + blocks + b"\x00\x00\x00\x00"


def snappy_raw_bomb() -> bytes:
    return compress_raw_snappy_header(BOMB_SIZE) + b"\x00" * 1000


def compress_raw_snappy_header(length: int) -> bytes:
    out = bytearray()
    while length >= 0x80:
        out.append((length & 0x7F) | 0x80)
        length >>= 7
    out.append(length)
    return bytes(out)


def snappy_xerial_bomb() -> bytes:
    block = snappy.compress(bytes(32 * 1024))
    return xerial(*[block] * (BOMB_SIZE // (32 * 1024)))


BOMBS = {
    "gzip": (CompressionType.GZIP, gzip_bomb),
    "gzip-single-member": (CompressionType.GZIP, gzip_single_member_bomb),
    "zstd": (CompressionType.ZSTD, zstd_bomb),
    "lz4": (CompressionType.LZ4, lz4_bomb),
    "snappy-raw": (CompressionType.SNAPPY, snappy_raw_bomb),
    "snappy-xerial": (CompressionType.SNAPPY, snappy_xerial_bomb),
}


@pytest.mark.parametrize("name", BOMBS)
def test_bombs_are_refused_without_inflating(name):
    codec, make = BOMBS[name]
    bomb = make()
    tracemalloc.start()
    try:
        with pytest.raises(DecompressionError, match=f"{MIB}-byte limit"):
            decompress(codec, bomb, max_size=MIB)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 8 * MIB


@pytest.mark.parametrize("codec", COMPRESSED)
def test_output_exactly_at_the_limit_is_accepted(codec):
    data = b"z" * 300_000
    assert decompress(codec, compress(codec, data), max_size=len(data)) == data
    with pytest.raises(DecompressionError):
        decompress(codec, compress(codec, data), max_size=len(data) - 1)
