"""The records `samsa produce` reads and `samsa consume` writes, and their JSON lines (text lines
are Kafka's: line_reader.py reads them, message_formatter.py writes them).

A JSON line is an object: "key" and "value" (a string, taken as its UTF-8 bytes; any other JSON
value as its compact JSON text; null for a null key or value), "headers" (an object, or a list of
[key, value] pairs when a key repeats), and when producing optionally "partition" and "timestamp"
(ms). Consume writes the same fields plus "topic", "partition", "offset" and "timestamp", so its
output can be produced again. Bytes that are not UTF-8 pass through as surrogate escapes (JSON's
"\\udcXX"), so nothing is lost either way.
"""

from __future__ import annotations

import json
from typing import Any, NamedTuple

from . import BAD_USAGE, CommandError

Headers = list[tuple[str, bytes | None]]


class InputRecord(NamedTuple):
    """A record to produce; partition None: the partitioner chooses, timestamp None: now."""

    key: bytes | None
    value: bytes | None
    headers: Headers
    partition: int | None = None
    timestamp: int | None = None


class OutputRecord(NamedTuple):
    topic: str
    partition: int
    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: Headers
    timestamp_type: int = 0  # wire/records' CREATE_TIME or LOG_APPEND_TIME, the batch's


def to_bytes(text: str | None) -> bytes | None:
    return None if text is None else text.encode("utf-8", "surrogateescape")


def to_text(data: bytes | None) -> str | None:
    return None if data is None else bytes(data).decode("utf-8", "surrogateescape")


def _json_bytes(value: Any) -> bytes | None:
    if value is None:
        return None
    if isinstance(value, str):
        return to_bytes(value)
    return json.dumps(value, separators=(",", ":")).encode()


def _json_headers(headers: Any, line_number: int) -> Headers:
    if headers is None:
        return []
    if isinstance(headers, dict):
        pairs = list(headers.items())
    elif isinstance(headers, list) and all(isinstance(h, list) and len(h) == 2 for h in headers):
        pairs = [tuple(h) for h in headers]
    else:
        raise CommandError(f"line {line_number}: headers must be an object or a list of [key, value] pairs",
                           BAD_USAGE)
    return [(str(key), _json_bytes(value)) for key, value in pairs]


def parse_json_line(line: bytes, line_number: int, headers: Headers) -> InputRecord:
    try:
        document = json.loads(line.decode("utf-8", "surrogateescape"))
    except ValueError as e:
        raise CommandError(f"line {line_number}: not JSON: {e}", BAD_USAGE) from None
    if not isinstance(document, dict):
        raise CommandError(f"line {line_number}: expected a JSON object", BAD_USAGE)
    partition, timestamp = document.get("partition"), document.get("timestamp")
    for name, number in (("partition", partition), ("timestamp", timestamp)):
        if number is not None and (not isinstance(number, int) or isinstance(number, bool)):
            raise CommandError(f"line {line_number}: {name} must be an integer", BAD_USAGE)
    return InputRecord(_json_bytes(document.get("key")), _json_bytes(document.get("value")),
                       headers + _json_headers(document.get("headers"), line_number), partition, timestamp)


def format_json(record: OutputRecord) -> bytes:
    keys = [key for key, _ in record.headers]
    headers: Any
    if len(set(keys)) == len(keys):
        headers = {key: to_text(value) for key, value in record.headers}
    else:
        headers = [[key, to_text(value)] for key, value in record.headers]
    document = {"topic": record.topic, "partition": record.partition, "offset": record.offset,
                "timestamp": record.timestamp, "key": to_text(record.key), "value": to_text(record.value),
                "headers": headers}
    # A surrogate escape (a byte that was not UTF-8) can only be in a string: backslashreplace
    # writes it as JSON's own escape, \udcXX, which parse_json_line turns back into the byte.
    return json.dumps(document, ensure_ascii=False).encode("utf-8", "backslashreplace") + b"\n"
