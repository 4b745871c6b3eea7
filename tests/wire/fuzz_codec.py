"""Coverage-guided fuzzing of the wire decoders with atheris.

    python tests/wire/fuzz_codec.py -max_total_time=60

Exits 0 when the time is up with no crash. A crash is any exception other than CodecError (and
its subclasses) from request decoding, response decoding or record batch header parsing; atheris
then writes the input to crash-<hash> and exits non-zero.
"""

from __future__ import annotations

import sys

import atheris

with atheris.instrument_imports():
    from samsa.wire.exceptions import CodecError
    from samsa.wire.messages import APIS
    from samsa.wire.protocol import decode_request, decode_response, response_class
    from samsa.wire.records import iter_batch_headers

API_KEYS = sorted(APIS)


def decode_any_response(data: bytes) -> None:
    """The first three bytes pick the api and version; the rest is the response frame body."""
    if len(data) < 3:
        return
    api_key = API_KEYS[data[0] % len(API_KEYS)]
    lo, hi = response_class(api_key).VALID_VERSIONS
    version = lo + int.from_bytes(data[1:3], "big") % (hi - lo + 1)
    decode_response(data[3:], api_key, version)


def scan_record_batches(data: bytes) -> None:
    for _ in iter_batch_headers(data):
        pass


TARGETS = (decode_request, decode_any_response, scan_record_batches)


def test_one_input(data: bytes) -> None:
    if not data:
        return
    try:
        TARGETS[data[0] % len(TARGETS)](data[1:])
    except CodecError:
        pass


def main() -> None:
    atheris.Setup(sys.argv, test_one_input)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
