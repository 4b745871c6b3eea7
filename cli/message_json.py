"""Any generated message as the JSON Kafka's generated `*JsonConverter.write` gives, printed as
Jackson prints it (compact, keys in schema order), for the tools that show records as Kafka's do.

The converter's rules: a field absent from the version is left out; a tagged field only when it
differs from its default; field names are the schema's in camelCase; int64s are numbers, UUIDs
Kafka's base64 form, bytes standard base64 (Jackson's BinaryNode), a null nullable field `null`.
The walk is driven by each class's `_schema` (wire/codec.py's FieldInfo), so no message needs code
of its own here.
"""

from __future__ import annotations

import base64
import re
from typing import Any

from ..server.config.kafka_config import java_double
from ..storage.checkpoints import kafka_uuid_string

_CAMEL_BOUNDARY = re.compile(r"_([a-z0-9])")


def json_name(attribute: str) -> str:
    """The schema's field name in camelCase (its first letter lowered), from the attribute
    tools/gen_messages.py made of it: checked to round-trip for every schema Kafka 4.4 ships."""
    return _CAMEL_BOUNDARY.sub(lambda m: m.group(1).upper(), attribute.rstrip("_"))


def message_json(message: Any, version: int) -> dict[str, Any]:
    """The message's fields at `version`, as an insertion-ordered dict of JSON values."""
    node: dict[str, Any] = {}
    defaults = None
    for info in type(message)._schema:
        if not info.in_version(version):
            continue
        value = getattr(message, info.name)
        if info.tagged_in(version):
            if defaults is None:
                defaults = type(message)()
            if value == getattr(defaults, info.name):
                continue
        node[json_name(info.name)] = _field_json(info.type, value, version)
    return node


def _field_json(kind: str, value: Any, version: int) -> Any:
    if value is None:
        return None
    if kind.startswith("[]"):
        element = kind[2:]
        return [_field_json(element, item, version) for item in value]
    if kind == "uuid":
        return kafka_uuid_string(value)
    if kind in ("bytes", "records"):
        return base64.b64encode(bytes(value)).decode("ascii")
    if kind == "float64":
        return float(value)
    if isinstance(value, (str, bool, int)):
        return value
    return message_json(value, version)  # a struct


# Jackson escapes '"', '\\' and the C0 controls (short forms where JSON has them, else \u00XX in
# upper-case hex); everything else, non-ASCII included, is written as it is.
_SHORT_ESCAPES = {'"': '\\"', "\\": "\\\\", "\b": "\\b", "\t": "\\t", "\n": "\\n", "\f": "\\f", "\r": "\\r"}
_ESCAPES = str.maketrans({**{chr(c): f"\\u{c:04X}" for c in range(0x20)}, **_SHORT_ESCAPES})


def json_string(text: str) -> str:
    return '"' + text.translate(_ESCAPES) + '"'


def to_json(value: Any) -> str:
    """Compact JSON text as Jackson's JsonNode.toString() writes it."""
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, str):
        return json_string(value)
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return java_double(value)
    if isinstance(value, dict):
        return "{" + ",".join(f"{json_string(k)}:{to_json(v)}" for k, v in value.items()) + "}"
    return "[" + ",".join(to_json(v) for v in value) + "]"
