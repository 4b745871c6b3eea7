"""Coverage-guided fuzzing of the wire decoders with atheris.

    python tests/wire/fuzz_codec.py -max_total_time=60

Exits 0 when the time is up with no crash. A crash is any exception other than CodecError (and
its subclasses) from request decoding, message decoding or record batch header parsing, or the C
codec (samsa.wire._speedups, when built) disagreeing with the pure one: a different message, a
different CodecError subclass, or a different outcome when the bytes after the data are not its
own (a read past the end). atheris then writes the input to crash-<hash> and exits non-zero.
"""

from __future__ import annotations

import sys
from pathlib import Path

import atheris

with atheris.instrument_imports():
    from samsa.wire import codec
    from samsa.wire.exceptions import CodecError
    from samsa.wire.messages import MODULES
    from samsa.wire.protocol import decode_request, message_class
    from samsa.wire.records import iter_batch_headers

sys.path.insert(0, str(Path(__file__).resolve().parent))
from codec_pair import check_decode  # noqa: E402

MESSAGES = [message_class(name) for name in sorted(MODULES)]


def decode_any_message(data: bytes) -> None:
    """The first three bytes pick the message (any request, response, header or data message) and
    its version; the rest is its body, decoded by both codecs."""
    if len(data) < 3:
        return
    cls = MESSAGES[int.from_bytes(data[:2], "big") % len(MESSAGES)]
    lo, hi = cls.VALID_VERSIONS
    check_decode(cls, data[3:], lo + data[2] % (hi - lo + 1))


def scan_record_batches(data: bytes) -> None:
    for _ in iter_batch_headers(data):
        pass


TARGETS = (decode_request, decode_any_message, scan_record_batches)


def test_one_input(data: bytes) -> None:
    if not data:
        return
    try:
        TARGETS[data[0] % len(TARGETS)](data[1:])
    except CodecError:
        pass


def main() -> None:
    print(f"C codec: {'in use' if codec.ACCELERATED else 'not in use: ' + codec.SPEEDUPS_MISSING}", flush=True)
    atheris.Setup(sys.argv, test_one_input)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
