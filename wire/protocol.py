"""Kafka's framing and headers, and the registry of generated messages by api key.

A frame is an int32 size followed by a header and a body. Which header version goes with which
request is fixed by the protocol: flexible request versions use request header v2 (tagged fields),
others v1 (ControlledShutdown v0 alone uses v0); flexible responses use response header v1, except
ApiVersions, whose response header is always v0 so that a client can parse it before it knows the
broker's versions (KIP-511).

Message modules are imported on first use, so that starting the broker does not load 186 codecs (the
two headers, which every frame has, at once).
"""

from __future__ import annotations

import struct
from functools import cache
from importlib import import_module
from typing import Any

from .codec import Message, piece_size
from .exceptions import CodecError, UnsupportedVersionError
from .messages import APIS, MODULES, ApiKey
from .messages.request_header import RequestHeader
from .messages.response_header import ResponseHeader

__all__ = [
    "ApiKey", "RequestHeader", "ResponseHeader", "request_class", "response_class", "message_class",
    "request_header_version", "response_header_version", "peek_request_api", "decode_request_header",
    "decode_request", "encode_request", "encode_response", "decode_response", "SIZE",
]

SIZE = struct.Struct(">i")
_API = struct.Struct(">hh")


# The registry's classes are typed Any: which class a name or api key gives is known at run time only,
# and `type[Message]` would make a type checker refuse every field. A module that imports a generated
# class by name (`from ..wire.messages.fetch_request import FetchRequest`) gets its fields checked.
@cache
def message_class(name: str) -> type[Any]:
    """The generated class of a message by its schema name (e.g. "ConsumerProtocolAssignment")."""
    module = import_module(f"{__package__}.messages.{MODULES[name]}")
    return getattr(module, name)


@cache
def request_class(api_key: int) -> type[Any]:
    try:
        return message_class(APIS[api_key][1])
    except KeyError:
        raise UnsupportedVersionError(f"unknown api key {api_key}") from None


@cache
def response_class(api_key: int) -> type[Any]:
    try:
        return message_class(APIS[api_key][3])
    except KeyError:
        raise UnsupportedVersionError(f"unknown api key {api_key}") from None



# Cached: asked for every request and response, and decided by the (api key, version) alone;
# callers pass only versions the api has, so the caches stay as small as the protocol.
@cache
def request_header_version(api_key: int, api_version: int) -> int:
    if request_class(api_key).is_flexible(api_version):
        return 2
    if api_key == ApiKey.CONTROLLED_SHUTDOWN and api_version == 0:
        return 0
    return 1


@cache
def response_header_version(api_key: int, api_version: int) -> int:
    if api_key == ApiKey.API_VERSIONS:
        return 0
    return 1 if response_class(api_key).is_flexible(api_version) else 0


def peek_request_api(frame) -> tuple[int, int]:
    """(api_key, api_version) of a request frame body (without its size prefix)."""
    if len(frame) < 4:
        raise CodecError("request is shorter than its api key and version")
    return _API.unpack_from(frame, 0)


def decode_request_header(frame) -> tuple[RequestHeader, int]:
    """Decode the header of a request frame body; returns (header, position of the body).

    Raises UnsupportedVersionError for an unknown api key or version (the caller still has the
    correlation id in the header to answer with).
    """
    api_key, api_version = peek_request_api(frame)
    try:
        cls = request_class(api_key)
    except UnsupportedVersionError:
        return RequestHeader.decode_from(frame, 1)
    if not cls.VALID_VERSIONS[0] <= api_version <= cls.VALID_VERSIONS[1]:
        # Decode with the oldest header form the api could use: correlation id and client id.
        return RequestHeader.decode_from(frame, 1)
    return RequestHeader.decode_from(frame, request_header_version(api_key, api_version))


def decode_request(frame) -> tuple[RequestHeader, Message]:
    """Decode a whole request frame body into (header, request)."""
    header, pos = decode_request_header(frame)
    cls = request_class(header.request_api_key)
    return header, cls.decode(frame, header.request_api_version, pos)


def encode_request(message: Message, version: int, correlation_id: int, client_id: str | None) -> bytearray:
    """A complete request frame, size prefix included (clients and tests)."""
    api_key = message.API_KEY
    header = RequestHeader(request_api_key=api_key, request_api_version=version,
                           correlation_id=correlation_id, client_id=client_id)
    out = bytearray(b"\0\0\0\0")
    header.encode(request_header_version(api_key, version), out)
    message.encode(version, out)
    SIZE.pack_into(out, 0, len(out) - 4)
    return out


def encode_response(message: Message, version: int, correlation_id: int, out: bytearray | None = None) -> bytearray:
    """A complete response frame, size prefix included, appended to `out`.

    `out` may be a codec.FrameBuffer, whose holes (records it leaves out) count in the size.
    """
    if out is None:
        out = bytearray()
    start = len(out)
    out += b"\0\0\0\0"
    header_version = response_header_version(message.API_KEY, version)
    out += SIZE.pack(correlation_id)
    if header_version >= 1:
        out.append(0)  # no tagged fields
    message.encode(version, out)
    size = len(out) - start - 4
    holes = getattr(out, "holes", None)
    if holes:  # most responses have none: no generator for them
        size += sum(piece_size(h) for pos, h in holes if pos >= start)
    SIZE.pack_into(out, start, size)
    return out


def decode_response(frame, api_key: int, version: int) -> tuple[int, Message]:
    """Decode a response frame body (without its size prefix): (correlation id, response)."""
    header, pos = ResponseHeader.decode_from(frame, response_header_version(api_key, version))
    return header.correlation_id, response_class(api_key).decode(frame, version, pos)
