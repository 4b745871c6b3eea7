"""Quick fuzzing of the decoders with hypothesis: random and mutated bytes must decode or raise a
CodecError, nothing else. tests/wire/fuzz_codec.py runs the same targets under atheris for longer."""

from __future__ import annotations

import struct
import sys
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from samsa.wire.exceptions import CodecError
from samsa.wire.messages import APIS
from samsa.wire.protocol import decode_request, decode_response, encode_request, request_class, response_class
from samsa.wire.records import iter_batch_headers, parse_batch_header

sys.path.insert(0, str(Path(__file__).resolve().parent))
from wire_strategies import message_strategy, mutated  # noqa: E402

FUZZ = settings(max_examples=300, deadline=None, database=None, derandomize=True,
                suppress_health_check=list(HealthCheck))
API_KEYS = sorted(APIS)


def decodes_or_refuses(decode, *args) -> None:
    try:
        decode(*args)
    except CodecError:
        pass


@st.composite
def api_versions(draw, classes):
    cls = classes(draw(st.sampled_from(API_KEYS)))
    return cls, draw(st.integers(*cls.VALID_VERSIONS))


@FUZZ
@given(st.binary(max_size=64))
def test_random_request_frames(frame):
    decodes_or_refuses(decode_request, frame)


@FUZZ
@given(st.sampled_from(API_KEYS), st.integers(0, 20), st.integers(0, 2**31 - 1), st.binary(max_size=64))
def test_random_request_bodies_behind_a_valid_header(api_key, version, correlation_id, body):
    header = struct.pack(">hhih", api_key, version, correlation_id, -1)
    decodes_or_refuses(decode_request, header + b"\x00" + body)


@FUZZ
@given(api_versions(response_class), st.binary(max_size=64))
def test_random_response_frames(api_version, frame):
    cls, version = api_version
    decodes_or_refuses(decode_response, frame, cls.API_KEY, version)


@FUZZ
@given(st.data())
def test_mutated_requests(data):
    cls, version = data.draw(api_versions(request_class))
    message = data.draw(message_strategy(cls, version))
    frame = bytes(encode_request(message, version, correlation_id=1, client_id="fuzz"))[4:]
    decodes_or_refuses(decode_request, data.draw(mutated(frame)))


@FUZZ
@given(st.data())
def test_mutated_responses(data):
    cls, version = data.draw(api_versions(response_class))
    body = bytes(data.draw(message_strategy(cls, version)).encode(version))
    decodes_or_refuses(cls.decode, data.draw(mutated(body)), version)


@FUZZ
@given(st.binary(max_size=200))
def test_random_record_batch_headers(data):
    decodes_or_refuses(parse_batch_header, data)
    decodes_or_refuses(lambda d: list(iter_batch_headers(d)), data)
