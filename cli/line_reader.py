"""How `samsa produce` reads a text line into a record: Kafka's LineMessageReader (the console
producer's), configured by the same properties (`--property`/`--reader-property`, `--reader-config`):

    parse.key=false          the line holds a key before key.separator (tab)
    parse.headers=false      the line starts with headers before headers.delimiter (tab):
                             h1:v1,h2:v2 (pairs split by headers.separator, a regular expression,
                             default ","; key and value by headers.key.separator, default ":")
    ignore.error=false       a line without a separator is not an error: no key (or no headers),
                             the rest is the value; a header without its separator has a null value
    null.marker              a key, value or header value equal to it is null (a header key may not be)

With both, a line is `h1:v1,h2:v2<TAB>key<TAB>value`. Lines are split at \\n, \\r\\n or \\r, as
Java's BufferedReader.readLine splits them. Kafka decodes a line as UTF-8 (malformed bytes become
U+FFFD); here bytes that are not UTF-8 pass through unchanged.
"""

from __future__ import annotations

import re

from . import BAD_USAGE, CommandError
from .record_io import Headers, InputRecord


class LineParseError(Exception):
    """A line the reader cannot take (Kafka's KafkaException, with its message)."""


def _decode(line: bytes) -> str:
    return line.decode("utf-8", "surrogateescape")


def _encode(text: str) -> bytes:
    return text.encode("utf-8", "surrogateescape")


def _flag(props: dict[str, str], name: str) -> bool:
    return props.get(name, "false").strip().lower() == "true"


class LineMessageReader:
    """`read(line, line_number)`: the record of one line (without its line terminator)."""

    def __init__(self, props: dict[str, str] | None = None) -> None:
        props = props or {}
        self.parse_key = _flag(props, "parse.key")
        self.key_separator = props.get("key.separator", "\t")
        self.parse_headers = _flag(props, "parse.headers")
        self.headers_delimiter = props.get("headers.delimiter", "\t")
        self.headers_separator = props.get("headers.separator", ",")
        self.headers_key_separator = props.get("headers.key.separator", ":")
        self.ignore_error = _flag(props, "ignore.error")
        self.null_marker = props.get("null.marker")
        for first, second in (("headers.delimiter", "headers.separator"), ("headers.delimiter", "headers.key.separator"),
                              ("headers.separator", "headers.key.separator")):
            if self._setting(first) == self._setting(second):
                raise CommandError(f"{first} and {second} may not be equal", BAD_USAGE)
        for name in ("key.separator", "headers.separator", "headers.delimiter", "headers.key.separator"):
            if self._setting(name) == self.null_marker:
                raise CommandError(f"null.marker and {name} may not be equal", BAD_USAGE)
        try:
            self._headers_pattern = re.compile(self.headers_separator)
        except re.error as e:
            raise CommandError(f"headers.separator {self.headers_separator!r} is not a regular expression: {e}",
                               BAD_USAGE) from None

    def _setting(self, name: str) -> str:
        return getattr(self, name.replace(".", "_"))

    def read(self, line: bytes, line_number: int) -> InputRecord:
        text = _decode(line)
        headers = self._part(self.parse_headers, text, 0, self.headers_delimiter, "headers delimiter", line_number)
        header_end = 0 if headers is None else len(headers) + len(self.headers_delimiter)
        key = self._part(self.parse_key, text, header_end, self.key_separator, "key separator", line_number)
        key_end = 0 if key is None else len(key) + len(self.key_separator)
        value = text[header_end + key_end:]
        parsed: Headers = []
        if headers is not None and headers != self.null_marker:
            parsed = self._split_headers(headers, line_number)
        return InputRecord(self._nullable(key), self._nullable(value), parsed)

    def _nullable(self, text: str | None) -> bytes | None:
        return None if text is None or text == self.null_marker else _encode(text)

    def _part(self, enabled: bool, line: str, start: int, separator: str, name: str, line_number: int) -> str | None:
        if not enabled:
            return None
        index = line.find(separator, start)
        if index == -1:
            if self.ignore_error:
                return None
            raise LineParseError(f"No {name} found on line number {line_number}: '{line}'")
        return line[start:index]

    def _split_headers(self, headers: str, line_number: int) -> Headers:
        pairs = self._headers_pattern.split(headers)
        if len(pairs) > 1:  # Java's String.split drops trailing empty strings (not a lone one)
            while pairs and pairs[-1] == "":
                pairs.pop()
        parsed: Headers = []
        for pair in pairs:
            index = pair.find(self.headers_key_separator)
            if index == -1:
                if not self.ignore_error:
                    raise LineParseError(f"No header key separator found in pair '{pair}' on line number {line_number}")
                parsed.append((pair, None))
                continue
            key, value = pair[:index], pair[index + len(self.headers_key_separator):]
            if key == self.null_marker:
                raise LineParseError(f"Header keys should not be equal to the null marker '{self.null_marker}' "
                                     "as they can't be null")
            parsed.append((key, None if value == self.null_marker else _encode(value)))
        return parsed


LINE_END = re.compile(rb"\r\n|\r|\n")


def split_lines(data: bytes, final: bool) -> tuple[list[bytes], bytes]:
    """The complete lines in `data` and the rest (an unfinished line); with `final` (no more input
    to come) the rest is a last line. A \r that ends non-final data waits: a \n may follow it."""
    held = 1 if not final and data.endswith(b"\r") else 0
    *lines, rest = LINE_END.split(data[:len(data) - held])
    rest += data[len(data) - held:]
    if final and rest:
        lines.append(rest)
        rest = b""
    return lines, rest
