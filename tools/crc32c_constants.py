"""The folding factors of wire/_crc32c.c, derived: folding a 128-bit lane forward by D bits multiplies
its low and high 64-bit halves by x^(D+32) and x^(D-32) mod P (P the CRC-32C polynomial), each
bit-reflected (the CRC is reflected) and shifted left by one. Checked against a bitwise CRC: a lane
folded onto the lane D bits later leaves the CRC of the bytes unchanged.

    python tools/crc32c_constants.py        # prints the C #defines
"""

from __future__ import annotations

import random

POLYNOMIAL = 0x11EDC6F41  # CRC-32C, x^32 first
REFLECTED = 0x82F63B78
DISTANCES = (2048, 512, 384, 256, 128)  # bits: each accumulator over 256 bytes, a zmm, its lanes


def _x_power_mod(exponent: int) -> int:
    r = 1
    for _ in range(exponent):
        r <<= 1
        if r & (1 << 32):
            r ^= POLYNOMIAL
    return r


def _reflect32(v: int) -> int:
    return int(f"{v:032b}"[::-1], 2)


def factor(exponent: int) -> int:
    return _reflect32(_x_power_mod(exponent)) << 1


def fold_factors() -> dict[int, tuple[int, int]]:
    """{distance in bits: (low half's factor, high half's factor)}"""
    return {d: (factor(d + 32), factor(d - 32)) for d in DISTANCES}


def _clmul(a: int, b: int) -> int:
    r = 0
    while b:
        if b & 1:
            r ^= a
        a <<= 1
        b >>= 1
    return r


def _crc_register(data: bytes, register: int = 0) -> int:
    for byte in data:
        register ^= byte
        for _ in range(8):
            register = (register >> 1) ^ (REFLECTED if register & 1 else 0)
    return register


def folds_correctly(distance: int, low: int, high: int, rng: random.Random) -> bool:
    data = rng.randbytes(16 + distance // 8)
    lane = int.from_bytes(data[:16], "little")
    folded = _clmul(lane & (2**64 - 1), low) ^ _clmul(lane >> 64, high)
    rest = bytearray(data[16:])
    rest[-16:] = (int.from_bytes(rest[-16:], "little") ^ folded).to_bytes(16, "little")
    return _crc_register(data) == _crc_register(bytes(rest))


def main() -> None:
    rng = random.Random(0)
    for distance, (low, high) in fold_factors().items():
        assert folds_correctly(distance, low, high, rng), distance
        print(f"#define K{distance}_LO {low:#x}ULL\n#define K{distance}_HI {high:#x}ULL")


if __name__ == "__main__":
    main()
