"""Field programs: the generated message layouts as data, for the C codec (wire/_speedups.c).

tools/gen_messages.py writes, beside each message's pure-Python codec, a `_PROGRAMS` dict: one entry
per distinct struct layout (struct and version), named like the pure functions (`Topic_v9`):

    (class, flexible, fields, tagged fields, absent fields)

- fields, in wire order: `(attr, op)` or, for a struct or struct array, `(attr, op, layout name)`;
- tagged fields, in tag order: `(attr, op, layout name or None, tag, default)`;
- absent fields (not in this version): `(attr, default, must_hold_default)`: the decoder sets them
  to the default, the encoder refuses a non-default value unless the field is ignorable.

An op is a base type with flags. Defaults are values, except `list` (a fresh empty list) and a struct
class (a fresh default instance of it). The C module checks at load that it was built for these
opcodes (codec.py compares `_speedups.OPCODES` with `OPCODES`); a stale build is not used.
"""

from __future__ import annotations

INT8 = 1
INT16 = 2
UINT16 = 3
INT32 = 4
UINT32 = 5
INT64 = 6
FLOAT64 = 7
BOOL = 8
UUID = 9
STRING = 10
BYTES = 11
RECORDS = 12
STRUCT = 13

ARRAY = 0x10  # a count, then elements of the base type
COMPACT = 0x20  # flexible form: lengths and counts as an unsigned varint of n + 1 (0 for null)
NULLABLE = 0x40  # a negative length or count (a -1 marker for structs) is None
ZERO_COPY = 0x80  # bytes kept as a memoryview into the frame (records always are)

OPCODES = {name: value for name, value in globals().items() if name.isupper() and isinstance(value, int)}
