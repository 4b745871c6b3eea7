"""wire/_crc32c.c, the folded CRC-32C of record batches: the crc32c package's value for every length
around its folding steps (16, 64 and 256 bytes), any alignment, continued from a value; its folding
factors are tools/crc32c_constants.py's."""

from __future__ import annotations

import importlib.util
import random
import re
from pathlib import Path

import crc32c as crc32c_package
import pytest

from samsa.wire import records

REPO = Path(__file__).resolve().parents[2]

try:
    from samsa.wire import _crc32c
except ImportError:
    _crc32c = None

folded = pytest.mark.skipif(_crc32c is None or not _crc32c.FAST,
                            reason="wire/_crc32c is not built, or this CPU has no VPCLMULQDQ")


def constants_tool():
    spec = importlib.util.spec_from_file_location("crc32c_constants", REPO / "tools" / "crc32c_constants.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_c_sources_folding_factors_are_the_derived_ones():
    tool = constants_tool()
    source = (REPO / "wire" / "_crc32c.c").read_text()
    defined = {(int(d), half): int(v, 16) for d, half, v in re.findall(r"#define K(\d+)_(LO|HI) (0x[0-9a-f]+)ULL", source)}
    derived = {}
    for distance, (low, high) in tool.fold_factors().items():
        derived[(distance, "LO")], derived[(distance, "HI")] = low, high
    assert defined == derived, "run python tools/crc32c_constants.py and copy its #defines into wire/_crc32c.c"


def test_the_derived_factors_fold_without_changing_the_crc():
    tool = constants_tool()
    rng = random.Random(7)
    for distance, (low, high) in tool.fold_factors().items():
        assert tool.folds_correctly(distance, low, high, rng)
        assert not tool.folds_correctly(distance, low ^ 2, high, rng)  # the check can fail


@folded
def test_every_length_and_alignment_matches_the_crc32c_package():
    rng = random.Random(1)
    data = rng.randbytes(4 << 20)
    lengths = list(range(0, 1100)) + [rng.randrange(1100, 4 << 20) for _ in range(200)] + [4 << 20]
    for length in lengths:
        start = rng.randrange(0, 64) if length < (4 << 20) - 64 else 0
        piece = memoryview(data)[start:start + length]
        assert _crc32c.crc32c(piece) == crc32c_package.crc32c(piece), (length, start)


@folded
def test_a_crc_continued_from_a_value_matches():
    rng = random.Random(2)
    for length in (0, 7, 300, 5000):
        head, tail = rng.randbytes(61), rng.randbytes(length)
        expected = crc32c_package.crc32c(tail, crc32c_package.crc32c(head))
        assert _crc32c.crc32c(tail, _crc32c.crc32c(head)) == expected


@folded
def test_record_batches_use_it():
    assert records.crc32c is _crc32c.crc32c
