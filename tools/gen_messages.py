"""Generate wire/messages/ from Apache Kafka's message schemas.

Usage: python tools/gen_messages.py [SOURCE [OUTPUT_DIR]] [--older OLDER]
       (defaults: the kafka-clients jar of the kafka4 profile of scripts/fetch-jars.sh, in
       $SAMSA_CACHE/kafka4 or ~/.cache/samsa/kafka4; wire/messages; and, as OLDER, the kafka-clients
       jar of the kafka39 profile)
   or: python tools/gen_messages.py --records [SOURCE ... [--output OUTPUT_DIR]]
       (defaults: Kafka's group, transaction and share coordinator jars in the kafka4 jar cache, and
       wire/coordinator_records)
   or: python tools/gen_messages.py --metadata-records [SOURCE [--output OUTPUT_DIR]]
       (defaults: the kafka-metadata jar in the kafka4 jar cache, and wire/metadata_records)

A SOURCE or OLDER is a jar holding schemas as common/message/*.json, or a directory of schemas.

The messages are those of SOURCE, the newest Kafka (4.x), with the versions OLDER (Kafka 3.9) still
defined and SOURCE dropped (KIP-896 removed Produce v0-2, Fetch v0-3 and more in Kafka 4.0; ZooKeeper's
inter-broker APIs are gone altogether): Samsa serves what Kafka 3.9 served, so its codec must still
speak those. Each message is generated from one merged schema: SOURCE's, with its validVersions
floor lowered to OLDER's, and with the fields SOURCE deleted because only dropped versions had them
(ListOffsets v0's MaxNumOffsets, OffsetCommit v1's CommitTimestamp, ...) put back from OLDER at
their place; a message SOURCE defines no versions of is OLDER's. A version OLDER marked unstable
(share groups' v0) was never part of its protocol and is not kept. The merge is checked: every dropped
version must lay out exactly as OLDER lays it out, every other version exactly as SOURCE does
(generation fails otherwise, e.g. where a field was renamed in a dropped version). The generated class
says which versions came from OLDER in REMOVED_VERSIONS (None when none did); versions above those are
Kafka's current range.

The second form generates the coordinators' records (the keys and values of __consumer_offsets,
__transaction_state and __share_group_state), whose schemas Kafka publishes only inside its
coordinator jars (common/message/*.json).

The third form generates the records of KRaft's metadata log (`__cluster_metadata`: TopicRecord,
PartitionRecord, ConfigRecord, ...), whose schemas are in Kafka's kafka-metadata jar
(common/metadata/*.json); storage/cluster_metadata.py reads a log dir Kafka wrote with them.

For every schema (requests, responses, headers, data) it writes one module with a class per struct
(fields in __slots__, Kafka's names in snake_case) and, per struct and per version, a decode and an
encode function specialised to that version's layout. Versions whose layout is identical share one
function. Consecutive fixed-width fields are read and written with one precompiled struct; records
are left as memoryviews into the request. Each module ends with the same layouts as field programs
(`_PROGRAMS`, format in wire/program.py) for the C codec, and `install`s them on the message class.
wire/messages/__init__.py indexes the modules by api key.
"""

from __future__ import annotations

import json
import os
import re
import sys
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# The jar cache profiles (scripts/fetch-jars.sh) whose kafka-clients jar holds the schemas.
NEWEST_PROFILE = "kafka4"
OLDER_PROFILE = "kafka39"
OUTPUT = ROOT / "wire" / "messages"
RECORDS_OUTPUT = ROOT / "wire" / "coordinator_records"
# The jars holding the coordinators' record schemas, in the kafka4 profile of scripts/fetch-jars.sh.
RECORD_JARS = ("kafka-group-coordinator", "kafka-transaction-coordinator", "kafka-share-coordinator")
METADATA_RECORDS_OUTPUT = ROOT / "wire" / "metadata_records"
METADATA_JAR = "kafka-metadata"  # its common/metadata/*.json: the records of __cluster_metadata
MAX_VERSION = 32767

# kafka type -> (struct code, size, python default); fixed-width primitives only.
FIXED = {
    "bool": ("?", 1, "False"),
    "int8": ("b", 1, "0"),
    "int16": ("h", 2, "0"),
    "uint16": ("H", 2, "0"),
    "int32": ("i", 4, "0"),
    "uint32": ("I", 4, "0"),
    "int64": ("q", 8, "0"),
    "float64": ("d", 8, "0.0"),
    "uuid": ("16s", 16, "ZERO_UUID"),
}
VARIABLE = ("string", "bytes", "records")
PRIMITIVES = set(FIXED) | set(VARIABLE)
PYTHON_KEYWORDS = {"from", "global", "async", "await", "import", "class", "type"}


# --- schema model ------------------------------------------------------------------------------

@dataclass(frozen=True)
class Versions:
    lo: int
    hi: int  # inclusive; lo > hi means none

    @staticmethod
    def parse(text: str | None) -> "Versions":
        if text is None or text == "none":
            return Versions(1, 0)
        text = text.strip()
        if text.endswith("+"):
            return Versions(int(text[:-1]), MAX_VERSION)
        if "-" in text:
            lo, hi = text.split("-")
            return Versions(int(lo), int(hi))
        return Versions(int(text), int(text))

    def __contains__(self, v: int) -> bool:
        return self.lo <= v <= self.hi

    @property
    def empty(self) -> bool:
        return self.lo > self.hi

    def as_tuple(self) -> str:
        return "None" if self.empty else f"({self.lo}, {self.hi})"


def snake(name: str) -> str:
    s = re.sub(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])", "_", name).lower()
    return s + "_" if s in PYTHON_KEYWORDS else s


@dataclass
class FieldSpec:
    name: str
    attr: str
    type: str
    versions: Versions
    nullable: Versions
    tagged: Versions
    tag: int | None
    ignorable: bool
    default: str | None
    flexible_override: Versions | None
    zero_copy: bool
    struct: "StructSpec | None" = None

    @property
    def is_array(self) -> bool:
        return self.type.startswith("[]")

    @property
    def element(self) -> str:
        return self.type[2:] if self.is_array else self.type


@dataclass
class StructSpec:
    name: str
    fields: list[FieldSpec] = field(default_factory=list)
    versions: Versions = field(default_factory=lambda: Versions(0, MAX_VERSION))


@dataclass
class MessageSpec:
    name: str
    source: str
    api_key: int | None
    type: str
    listeners: list[str]
    valid: Versions
    flexible: Versions
    deprecated: Versions
    latest_unstable: bool
    root: StructSpec
    structs: list[StructSpec]  # nested first, root last
    removed: Versions = field(default_factory=lambda: Versions(1, 0))  # kept from the older schema


def load_json(path: Path) -> dict:
    return schema_json(path.read_text())


def schema_json(text: str) -> dict:
    """A schema's JSON: Kafka's schema files have whole-line // comments."""
    return json.loads("\n".join(line for line in text.splitlines() if not line.lstrip().startswith("//")))


def json_default(value) -> str:
    """Schemas write defaults as strings mostly, sometimes as JSON numbers, booleans or null."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return "null" if value is None else str(value)


def parse_schema(data: dict, source: str) -> MessageSpec:
    """The message of one schema; `source` says where the schema came from, in generated headers."""
    common: dict[str, dict] = {c["name"]: c for c in data.get("commonStructs", [])}
    structs: dict[str, StructSpec] = {}
    order: list[StructSpec] = []

    def build_struct(name: str, fields_json: list[dict], versions: Versions) -> StructSpec:
        if name in structs:
            return structs[name]
        spec = StructSpec(name, versions=versions)
        structs[name] = spec
        spec.fields = [build_field(f) for f in fields_json]
        order.append(spec)
        return spec

    def build_field(f: dict) -> FieldSpec:
        # A tagged field may leave out its versions: they are its tagged versions then.
        versions = Versions.parse(f["versions"] if "versions" in f else f["taggedVersions"])
        fs = FieldSpec(
            name=f["name"],
            attr=snake(f["name"]),
            type=f["type"],
            versions=versions,
            nullable=Versions.parse(f.get("nullableVersions")),
            tagged=Versions.parse(f.get("taggedVersions")),
            tag=f.get("tag"),
            ignorable=bool(f.get("ignorable", False)),
            default=json_default(f["default"]) if "default" in f else None,
            flexible_override=Versions.parse(f["flexibleVersions"]) if "flexibleVersions" in f else None,
            zero_copy=bool(f.get("zeroCopy", False)),
        )
        element = fs.element
        if element not in PRIMITIVES:
            if "fields" in f:
                fs.struct = build_struct(element, f["fields"], versions)
            elif element in common:
                c = common[element]
                fs.struct = build_struct(element, c["fields"], Versions.parse(c.get("versions", "0+")))
            else:
                raise ValueError(f"{source}: unknown type {fs.type} of field {fs.name}")
        return fs

    root = StructSpec(data["name"], versions=Versions.parse(data["validVersions"]))
    structs[root.name] = root
    root.fields = [build_field(f) for f in data.get("fields", [])]
    order.append(root)
    return MessageSpec(
        name=data["name"],
        source=source,
        api_key=data.get("apiKey"),
        type=data["type"],
        listeners=data.get("listeners", []),
        valid=Versions.parse(data["validVersions"]),
        flexible=Versions.parse(data.get("flexibleVersions", "none")),
        deprecated=Versions.parse(data.get("deprecatedVersions")),
        latest_unstable=bool(data.get("latestVersionUnstable", False)),
        root=root,
        structs=order,
        removed=Versions.parse(data.get("removedVersions")),
    )


# --- defaults ----------------------------------------------------------------------------------

def default_expr(f: FieldSpec) -> str:
    """Python expression for the field's default value (fresh objects for mutable ones)."""
    d = f.default
    if f.is_array:
        return "None" if d == "null" else "[]"
    if f.struct is not None:
        return "None" if d == "null" else f"{f.struct.name}()"
    t = f.type
    if d == "null":
        return "None"
    if t in ("string",):
        return repr(d if d is not None else "")
    if t == "records":
        return "None"
    if t == "bytes":
        return "b''"
    if t == "bool":
        return "True" if d == "true" else "False"
    if t == "float64":
        return repr(float(d)) if d is not None else "0.0"
    if t == "uuid":
        return "ZERO_UUID"
    if d is None or d == "":
        return "0"
    return str(int(d, 0))


def is_mutable_default(f: FieldSpec) -> bool:
    return default_expr(f) in ("[]",) or (f.struct is not None and default_expr(f) != "None")


def differs_from_default(f: FieldSpec, value: str) -> str:
    """Condition that `value` differs from the field's default (for tags and version checks)."""
    d = default_expr(f)
    if d == "[]":
        return f"{value}"
    if d == "None":
        return f"{value} is not None"
    if f.struct is not None:
        return f"{value} != {prototype_name(f.struct)}"
    return f"{value} != {d}"


def prototype_name(s: "StructSpec") -> str:
    """A module-private default instance of the struct, compared against, never handed out."""
    return f"_D_{s.name}"


# --- code emission -----------------------------------------------------------------------------

class Code:
    def __init__(self) -> None:
        self.lines: list[str] = []
        self.indent = 1

    def __call__(self, line: str) -> None:
        self.lines.append("    " * self.indent + line)

    def block(self) -> "_Indent":
        return _Indent(self)

    def text(self) -> str:
        return "\n".join(self.lines)


class _Indent:
    def __init__(self, code: Code) -> None:
        self.code = code

    def __enter__(self) -> None:
        self.code.indent += 1

    def __exit__(self, *exc) -> None:
        self.code.indent -= 1


class ModuleWriter:
    """Generates one message module; keeps the struct formats it needs as module constants."""

    def __init__(self, spec: MessageSpec) -> None:
        self.spec = spec
        self.formats: dict[str, str] = {}
        self.functions: dict[str, str] = {}  # name -> source
        # (struct name, version, 'd'|'e') -> canonical function name
        self.fn_names: dict[tuple[str, int, str], str] = {}
        self.bodies: dict[tuple[str, str], str] = {}
        self.tmp = 0
        # Field programs for the C codec: canonical name -> entry text, (struct, version) -> name.
        self.programs: dict[str, str] = {}
        self.program_names: dict[tuple[str, int], str] = {}
        self.program_bodies: dict[str, str] = {}

    def array_table(self, code: str) -> str:
        name = "_A_" + code.replace("?", "o").replace("H", "W").replace("I", "J")
        self.formats[name] = code
        return name

    def fmt(self, codes: str) -> str:
        name = "_S_" + codes.replace("16s", "U").replace("?", "o").replace("H", "W").replace("I", "J")
        self.formats[name] = ">" + codes
        return name

    def temp(self) -> str:
        self.tmp += 1
        return f"_t{self.tmp}"

    def flexible(self, version: int) -> bool:
        return version in self.spec.flexible

    # -- layout --

    def present(self, s: StructSpec, version: int) -> tuple[list[FieldSpec], list[FieldSpec]]:
        regular, tagged = [], []
        for f in s.fields:
            if version not in f.versions:
                continue
            if f.tag is not None and version in f.tagged:
                tagged.append(f)
            else:
                regular.append(f)
        return regular, sorted(tagged, key=lambda f: f.tag)

    def field_flexible(self, f: FieldSpec, version: int) -> bool:
        if f.flexible_override is not None:
            return version in f.flexible_override
        return self.flexible(version)

    # -- decode --

    def gen_struct(self, s: StructSpec, version: int, kind: str) -> str:
        key = (s.name, version, kind)
        if key in self.fn_names:
            return self.fn_names[key]
        for f in s.fields:
            if f.struct is not None and version in f.versions:
                self.gen_struct(f.struct, version, kind)
        self.tmp = 0
        body = self.decode_body(s, version) if kind == "d" else self.encode_body(s, version)
        canonical = self.bodies.get((kind, body))
        if canonical is None:
            canonical = f"_{kind}_{s.name}_v{version}"
            self.bodies[(kind, body)] = canonical
            args = "buf, pos" if kind == "d" else "o, out"
            self.functions[canonical] = f"def {canonical}({args}):\n{body}\n"
        self.fn_names[key] = canonical
        return canonical

    def decode_body(self, s: StructSpec, version: int, c: Code | None = None, obj: str = "o") -> str:
        """The decode function's body, or, given `c`, the same code inlined there into `obj`."""
        inlined = c is not None
        c = Code() if c is None else c
        regular, tagged = self.present(s, version)
        c(f"{obj} = _new({s.name})")
        pending_codes: list[str] = []
        pending_targets: list[str] = []
        post: list[str] = []

        def flush() -> None:
            if not pending_codes:
                return
            codes = "".join(pending_codes)
            name = self.fmt(codes)
            size = sum(FIXED_SIZE[x] for x in pending_codes)
            targets = ", ".join(pending_targets)
            c(f"{targets}, = {name}.unpack_from(buf, pos)")
            c(f"pos += {size}")
            for line in post:
                c(line)
            pending_codes.clear()
            pending_targets.clear()
            post.clear()

        for f in regular:
            target = f"{obj}.{f.attr}"
            what = f"{s.name}.{f.attr}"
            flex = self.field_flexible(f, version)
            nullable = version in f.nullable
            if not f.is_array and f.type in FIXED:
                code = FIXED[f.type][0]
                pending_codes.append(code)
                if f.type == "uuid":
                    t = self.temp()
                    pending_targets.append(t)
                    post.append(f"{target} = uuid_from({t})")
                else:
                    pending_targets.append(target)
                continue
            if f.struct is not None and not f.is_array:
                fn = self.fn_names[(f.struct.name, version, "d")]
                if nullable:
                    # Kafka marks a nullable struct with an int8: -1 null, 1 present (every version).
                    marker = self.temp()
                    pending_codes.append("b")
                    pending_targets.append(marker)
                    flush()
                    c(f"if {marker} < 0:")
                    with c.block():
                        c(f"{target} = None")
                    c("else:")
                    with c.block():
                        c(f"{target}, pos = {fn}(buf, pos)")
                else:
                    flush()
                    c(f"{target}, pos = {fn}(buf, pos)")
                continue
            # Variable-size field: its length (non-flexible) joins the fixed run.
            n = self.temp()
            if flex:
                flush()
                c(f"{n} = buf[pos]")
                c(f"if {n} < 128:")
                with c.block():
                    c("pos += 1")
                c("else:")
                with c.block():
                    c(f"{n}, pos = read_uvarint(buf, pos)")
                c(f"{n} -= 1")
            else:
                if f.is_array or f.type in ("bytes", "records"):
                    pending_codes.append("i")
                else:
                    pending_codes.append("h")
                pending_targets.append(n)
                flush()
            self.decode_value(c, f, version, n, target, nullable, what, may_inline=True)
        flush()
        for f in s.fields:
            if version not in f.versions:
                c(f"{obj}.{f.attr} = {default_expr(f)}")
        for f in tagged:
            c(f"{obj}.{f.attr} = {default_expr(f)}")
        if self.flexible(version):
            c("if buf[pos] == 0:")
            with c.block():
                c("pos += 1")
                c(f"{obj}._unknown_tagged = None")
            c("else:")
            with c.block():
                self.decode_tags(c, s, tagged, version, obj)
        else:
            c(f"{obj}._unknown_tagged = None")
        if inlined:
            return ""
        c(f"return {obj}, pos")
        return c.text()

    def is_leaf(self, s: StructSpec, version: int) -> bool:
        return all(f.struct is None for f in s.fields if version in f.versions)


    def decode_value(self, c: Code, f: FieldSpec, version: int, n: str, target: str, nullable: bool,
                     what: str, may_inline: bool = False) -> None:
        """Read the field whose length/count/marker is already in `n` (after compact adjustment).

        Elements of an array of leaf structs are decoded inline, saving a call per element, except
        inside a tagged field, whose loop variables the inlined tag section would overwrite."""
        c(f"if {n} < 0:")
        with c.block():
            if nullable:
                c(f"{target} = None")
            else:
                c(f"raise null_error({what!r})")
        c("else:")
        with c.block():
            if f.is_array:
                el = f.element
                if f.struct is not None:
                    fn = self.fn_names[(f.struct.name, version, "d")]
                    c(f"if {n} == 0:")
                    with c.block():
                        c(f"{target} = []")
                    c("else:")
                    c.indent += 1
                    c(f"check_count(buf, pos, {n}, {what!r})")
                    lst = self.temp()
                    c(f"{lst} = []")
                    c(f"for _ in range({n}):")
                    with c.block():
                        x = self.temp()
                        if may_inline and self.is_leaf(f.struct, version):
                            self.decode_body(f.struct, version, c, x)
                        else:
                            c(f"{x}, pos = {fn}(buf, pos)")
                        c(f"{lst}.append({x})")
                    c(f"{target} = {lst}")
                    c.indent -= 1
                elif el == "uuid":
                    c(f"{target}, pos = read_uuid_array(buf, pos, {n})")
                elif el in FIXED:
                    code, size, _ = FIXED[el]
                    # Short arrays (replica lists) through a precompiled struct, longer ones checked.
                    c(f"if {n} < {SHORT_ARRAY}:")
                    with c.block():
                        c(f"{target} = [*{self.array_table(code)}[{n}].unpack_from(buf, pos)]")  # [*t]: no call, unlike list(t)
                        c(f"pos += {size} * {n}")
                    c("else:")
                    with c.block():
                        c(f"{target}, pos = read_fixed_array(buf, pos, {n}, {code!r}, {size})")
                else:
                    c(f"check_count(buf, pos, {n}, {what!r})")
                    lst = self.temp()
                    c(f"{lst} = []")
                    c(f"for _ in range({n}):")
                    with c.block():
                        m = self.temp()
                        self.read_length(c, m, self.field_flexible(f, version), el)
                        c(f"if {m} < 0:")
                        with c.block():
                            c(f"raise null_error({what!r})")
                        e = self.temp()
                        c(f"{e} = pos + {m}")
                        c(f"{lst}.append({self.slice_expr(el, e, f)})")
                        c(f"pos = {e}")
                    c(f"{target} = {lst}")
            else:
                # A slice past the end comes out short and leaves pos past the end: the next read
                # fails, or Message.decode_from's final check does.
                e = self.temp()
                c(f"{e} = pos + {n}")
                c(f"{target} = {self.slice_expr(f.type, e, f)}")
                c(f"pos = {e}")

    def slice_expr(self, t: str, end: str, f: FieldSpec) -> str:
        if t == "string":
            return f"buf[pos:{end}].tobytes().decode()"  # faster than str(view, 'utf-8')
        if t == "records" or f.zero_copy:
            return f"buf[pos:{end}]"
        return f"bytes(buf[pos:{end}])"

    def read_length(self, c: Code, n: str, flex: bool, t: str) -> None:
        if flex:
            c(f"{n} = buf[pos]")
            c(f"if {n} < 128:")
            with c.block():
                c("pos += 1")
            c("else:")
            with c.block():
                c(f"{n}, pos = read_uvarint(buf, pos)")
            c(f"{n} -= 1")
        else:
            fmt = self.fmt("h" if t == "string" else "i")
            size = 2 if t == "string" else 4
            c(f"{n}, = {fmt}.unpack_from(buf, pos)")
            c(f"pos += {size}")

    def decode_tags(self, c: Code, s: StructSpec, tagged: list[FieldSpec], version: int, obj: str) -> None:
        c("unknown = None")
        c("count, pos = read_uvarint(buf, pos)")
        c("for _ in range(count):")
        with c.block():
            c("tag, pos = read_uvarint(buf, pos)")
            c("size, pos = read_uvarint(buf, pos)")
            first = True
            for f in tagged:
                c(f"{'if' if first else 'elif'} tag == {f.tag}:")
                first = False
                with c.block():
                    c("tag_end = check_length(buf, pos, size)")
                    # Tagged values are always encoded in the flexible form, and must fit in their size.
                    if not f.is_array and f.type in FIXED:
                        code, size, _ = FIXED[f.type]
                        name = self.fmt(code)
                        if f.type == "uuid":
                            c(f"{obj}.{f.attr} = uuid_from({name}.unpack_from(buf, pos)[0])")
                        else:
                            c(f"{obj}.{f.attr}, = {name}.unpack_from(buf, pos)")
                        c(f"pos += {size}")
                    elif f.struct is not None and not f.is_array:
                        fn = self.fn_names[(f.struct.name, version, "d")]
                        if version in f.nullable:
                            c("if buf[pos] >= 128:")
                            with c.block():
                                c(f"{obj}.{f.attr} = None")
                                c("pos += 1")
                            c("else:")
                            with c.block():
                                c(f"{obj}.{f.attr}, pos = {fn}(buf, pos + 1)")
                        else:
                            c(f"{obj}.{f.attr}, pos = {fn}(buf, pos)")
                    else:
                        n = self.temp()
                        self.read_length(c, n, True, f.type)
                        self.decode_value(c, f, version, n, f"{obj}.{f.attr}", version in f.nullable,
                                          f"{s.name}.{f.attr}")
                    c("if pos > tag_end:")
                    with c.block():
                        c(f"raise tag_overrun({s.name + '.' + f.attr!r})")
                    c("pos = tag_end")
            if tagged:
                c("else:")
                with c.block():
                    c("unknown, pos = read_unknown_tag(buf, pos, tag, size, unknown)")
            else:
                c("unknown, pos = read_unknown_tag(buf, pos, tag, size, unknown)")
        c(f"{obj}._unknown_tagged = unknown")

    # -- encode --

    def encode_body(self, s: StructSpec, version: int) -> str:
        c = Code()
        regular, tagged = self.present(s, version)
        for f in s.fields:
            if version not in f.versions and not f.ignorable:
                cond = differs_from_default(f, f"o.{f.attr}")
                c(f"if {cond}:")
                with c.block():
                    c(f"raise cannot_carry({s.name!r}, {f.attr!r})")
        pending_codes: list[str] = []
        pending_values: list[str] = []

        def flush() -> None:
            if not pending_codes:
                return
            name = self.fmt("".join(pending_codes))
            c(f"out += {name}.pack({', '.join(pending_values)})")
            pending_codes.clear()
            pending_values.clear()

        for f in regular:
            value = f"o.{f.attr}"
            if not f.is_array and f.type in FIXED:
                pending_codes.append(FIXED[f.type][0])
                pending_values.append(f"{value}.bytes" if f.type == "uuid" else value)
                continue
            flex = self.field_flexible(f, version)
            nullable = version in f.nullable
            what = f"{s.name}.{f.attr}"
            if f.type == "records":
                flush()
                c(f"write_records(out, {value}, {flex}, {nullable}, {what!r})")
                continue
            if flex:
                flush()
                self.encode_value(c, f, version, value, what, flex, nullable)
            else:
                # Non-flexible: the length joins the fixed run, the body follows it.
                self.encode_value(c, f, version, value, what, flex, nullable, pending_codes,
                                  pending_values, flush)
        flush()
        if self.flexible(version):
            if tagged:
                c("tags = []")
                for f in tagged:
                    value = f"o.{f.attr}"
                    c(f"if {differs_from_default(f, value)}:")
                    with c.block():
                        c("t = bytearray()")
                        inner = Code()
                        inner.indent = c.indent
                        self.encode_value(inner, f, version, value, f"{s.name}.{f.attr}", True,
                                          version in f.nullable, tagged_value=True, target="t")
                        c.lines.extend(inner.lines)
                        c(f"tags.append(({f.tag}, t))")
                c("u = o._unknown_tagged")
                c("if tags or u:")
                with c.block():
                    c("write_tags(out, tags, u)")
                c("else:")
                with c.block():
                    c("out.append(0)")
            else:
                c("u = o._unknown_tagged")
                c("if u:")
                with c.block():
                    c("write_tags(out, [], u)")
                c("else:")
                with c.block():
                    c("out.append(0)")
        if not c.lines:
            c("pass")
        return c.text()

    def encode_value(self, c: Code, f: FieldSpec, version: int, value: str, what: str, flex: bool,
                     nullable: bool, pending_codes=None, pending_values=None, flush=None,
                     tagged_value: bool = False, target: str = "out") -> None:
        """Write `value`. Non-flexible lengths go into the pending fixed run when one is given."""
        out = target
        if tagged_value and not f.is_array and f.type in FIXED:
            name = self.fmt(FIXED[f.type][0])
            c(f"{out} += {name}.pack({value}.bytes)" if f.type == "uuid" else f"{out} += {name}.pack({value})")
            return
        if f.type == "records":
            c(f"write_records({out}, {value}, True, {nullable}, {what!r})")
            return
        v = self.temp()
        c(f"{v} = {value}")

        def write_len(expr: str, code: str) -> None:
            if flex:
                self.write_compact_length(c, out, expr)
            elif pending_codes is not None:
                pending_codes.append(code)
                pending_values.append(expr)
                flush()
            else:
                c(f"{out} += {self.fmt(code)}.pack({expr})")

        if f.struct is not None and not f.is_array:
            if flush is not None:
                flush()
            fn = self.fn_names[(f.struct.name, version, "e")]
            if nullable:
                c(f"if {v} is None:")
                with c.block():
                    c(f"{out} += b'\\xff'")
                c("else:")
                with c.block():
                    c(f"{out} += b'\\x01'")
                    c(f"{fn}({v}, {out})")
            else:
                c(f"{fn}({v}, {out})")
            return

        if f.is_array:
            el = f.element
            count = self.temp()
            if nullable:
                c(f"{count} = -1 if {v} is None else len({v})")
            else:
                c(f"{count} = len({v})")
            write_len(count, "i")
            body = Code()
            body.indent = c.indent + (1 if nullable else 0)
            if f.struct is not None:
                fn = self.fn_names[(f.struct.name, version, "e")]
                x = self.temp()
                body(f"for {x} in {v}:")
                body.indent += 1
                body(f"{fn}({x}, {out})")
                body.indent -= 1
            elif el == "uuid":
                x = self.temp()
                body(f"for {x} in {v}:")
                body.indent += 1
                body(f"{out} += {x}.bytes")
                body.indent -= 1
            elif el in FIXED:
                body(f"write_fixed_array({out}, {v}, {FIXED[el][0]!r})")
            else:
                x = self.temp()
                b = self.temp()
                eflex = flex
                body(f"for {x} in {v}:")
                body.indent += 1
                if el == "string":
                    body(f"{b} = {x}.encode()")
                else:
                    body(f"{b} = {x}")
                if eflex:
                    self.write_compact_length(body, out, f"len({b})")
                else:
                    body(f"{out} += {self.fmt('h' if el == 'string' else 'i')}.pack(len({b}))")
                body(f"{out} += {b}")
                body.indent -= 1
            if nullable:
                c(f"if {v} is not None:")
            c.lines.extend(body.lines)
            return

        # string or bytes
        b = self.temp()
        code = "h" if f.type == "string" else "i"
        conv = f"{v}.encode()" if f.type == "string" else v
        if nullable:
            c(f"{b} = None if {v} is None else {conv}")
            write_len(f"-1 if {b} is None else len({b})", code)
            c(f"if {b} is not None:")
            with c.block():
                c(f"{out} += {b}")
        else:
            c(f"{b} = {conv}")
            write_len(f"len({b})", code)
            c(f"{out} += {b}")

    def write_compact_length(self, c: Code, out: str, expr: str) -> None:
        """Length + 1 as an unsigned varint (0 for null, from -1); one byte inline, as it mostly is."""
        n = expr
        if not expr.isidentifier():
            n = self.temp()
            c(f"{n} = {expr}")
        c(f"if {n} < 127:")
        with c.block():
            c(f"{out}.append({n} + 1)")
        c("else:")
        with c.block():
            c(f"{out} += uvarint({n} + 1)")

    # -- field programs (wire/program.py) --

    def gen_program(self, s: StructSpec, version: int) -> str:
        """The name of the struct's field program at `version`; versions with one layout share it."""
        key = (s.name, version)
        if key in self.program_names:
            return self.program_names[key]
        refs = {f.attr: self.gen_program(f.struct, version) for f in s.fields
                if f.struct is not None and version in f.versions}
        regular, tagged = self.present(s, version)
        fields = [f"({f.attr!r}, {self.opcode(f, version, False)}"
                  + (f", {refs[f.attr]!r})" if f.struct is not None else ")") for f in regular]
        tags = [f"({f.attr!r}, {self.opcode(f, version, True)}, {refs.get(f.attr)!r}, {f.tag}, "
                f"{program_default(f)})" for f in tagged]
        absent = [f"({f.attr!r}, {program_default(f)}, {not f.ignorable})"
                  for f in s.fields if version not in f.versions]
        body = (f"({s.name}, {self.flexible(version)}, {program_tuple(fields)}, {program_tuple(tags)}, "
                f"{program_tuple(absent)})")
        name = self.program_bodies.get(body)
        if name is None:
            name = self.program_bodies[body] = f"{s.name}_v{version}"
            self.programs[name] = body
        self.program_names[key] = name
        return name

    def opcode(self, f: FieldSpec, version: int, tagged: bool) -> str:
        variable = f.is_array or f.type in VARIABLE
        ops = ["STRUCT" if f.struct is not None else f.element.upper()]
        if f.is_array:
            ops.append("ARRAY")
        if variable and (tagged or self.field_flexible(f, version)):
            ops.append("COMPACT")
        if version in f.nullable and (variable or f.struct is not None):
            ops.append("NULLABLE")
        if f.zero_copy and f.type == "bytes":
            ops.append("ZERO_COPY")
        return " | ".join(ops)

    # -- module --

    def render(self) -> str:
        spec = self.spec
        for v in range(spec.valid.lo, spec.valid.hi + 1):
            self.gen_struct(spec.root, v, "d")
            self.gen_struct(spec.root, v, "e")
        out = [
            f"# Generated by tools/gen_messages.py from {spec.source}; do not edit.",
            f'"""{spec.name}: Kafka message codec ({spec.type}{api_key_note(spec)})."""',
            "",
            "# ruff: noqa",
            "import struct",
            "",
            "from ..codec import (DEFAULT, ZERO_UUID, FieldInfo, Message, Struct, _new, cannot_carry, check_count,",
            "                     check_length, install, null_error, read_fixed_array, read_unknown_tag, read_uuid_array,",
            "                     read_uvarint, short_arrays, tag_overrun, uuid_from, uvarint, write_fixed_array,",
            "                     write_records, write_tags)",
            "from ..program import (ARRAY, BOOL, BYTES, COMPACT, FLOAT64, INT8, INT16, INT32, INT64, NULLABLE, RECORDS,",
            "                       STRING, STRUCT, UINT16, UINT32, UUID, ZERO_COPY)",
            "",
        ]
        for name, fmt in sorted(self.formats.items()):
            if name.startswith("_A_"):
                out.append(f"{name} = short_arrays({fmt!r}, {SHORT_ARRAY})")
            else:
                out.append(f"{name} = struct.Struct({fmt!r})")
        out.append("")
        for s in spec.structs:
            out.append(self.render_class(s, s is spec.root))
        prototypes = sorted({f.struct.name for s in spec.structs for f in s.fields
                             if f.struct is not None and not f.is_array and default_expr(f) != "None"})
        out.extend(f"_D_{name} = {name}()" for name in prototypes)
        if prototypes:
            out.append("")
        lo, hi = spec.valid.lo, spec.valid.hi
        decoders = ", ".join(self.fn_names[(spec.root.name, v, "d")] for v in range(lo, hi + 1))
        encoders = ", ".join(self.fn_names[(spec.root.name, v, "e")] for v in range(lo, hi + 1))
        out.extend(self.functions[name] for name in self.reachable(decoders.split(", ") + encoders.split(", ")))
        out.append(f"{spec.root.name}._decoders = ({decoders},)")
        out.append(f"{spec.root.name}._encoders = ({encoders},)")
        roots = [self.gen_program(spec.root, v) for v in range(lo, hi + 1)]
        out.append("")
        out.append("# The same layouts as field programs for the C codec (wire/program.py explains them).")
        out.append("_PROGRAMS = {")
        for name, body in self.programs.items():
            out.append(f"    {name!r}: {body},")
        out.append("}")
        out.append(f"install({spec.root.name}, _PROGRAMS, ({''.join(repr(r) + ', ' for r in roots)}))")
        for s in spec.structs:
            out.append(self.render_schema(s))
        return "\n".join(out) + "\n"

    def reachable(self, roots: list[str]) -> list[str]:
        """The functions the roots call, in generation order: structs only ever decoded inline get none."""
        seen = set()
        stack = list(roots)
        while stack:
            name = stack.pop()
            if name not in seen:
                seen.add(name)
                stack.extend(re.findall(r"\b_[de]_\w+", self.functions[name]))
        return [name for name in self.functions if name in seen]

    def render_schema(self, s: StructSpec) -> str:
        """The class's FieldInfo tuple, assigned once every class of the module exists."""
        rows = []
        for f in s.fields:
            tagged = f.tagged.as_tuple() if f.tag is not None else "None"
            struct_ref = f.struct.name if f.struct is not None else "None"
            rows.append(f"    FieldInfo({f.attr!r}, {f.type!r}, {f.versions.as_tuple()}, {f.nullable.as_tuple()}, "
                        f"{f.tag!r}, {tagged}, {struct_ref}),")
        return "\n".join([f"{s.name}._schema = (", *rows, ")"])

    def render_class(self, s: StructSpec, is_root: bool) -> str:
        spec = self.spec
        attrs = [f.attr for f in s.fields]
        slots = ", ".join(repr(a) for a in attrs + ["_unknown_tagged"])
        lines = [f"class {s.name}({'Message' if is_root else 'Struct'}):"]
        lines.append(f"    __slots__ = ({slots},)")
        lines.append(f"    _fields = ({''.join(repr(a) + ', ' for a in attrs)})")
        if is_root:
            lines.append(f"    API_KEY = {spec.api_key!r}")
            lines.append(f"    MESSAGE_TYPE = {spec.type!r}")
            lines.append(f"    VALID_VERSIONS = ({spec.valid.lo}, {spec.valid.hi})")
            lines.append(f"    FLEXIBLE_VERSIONS = {spec.flexible.as_tuple()}")
            lines.append(f"    DEPRECATED_VERSIONS = {spec.deprecated.as_tuple()}")
            lines.append(f"    REMOVED_VERSIONS = {spec.removed.as_tuple()}")
            lines.append(f"    LISTENERS = {tuple(spec.listeners)!r}")
            lines.append(f"    LATEST_VERSION_UNSTABLE = {spec.latest_unstable!r}")
            # The nested structs (defined above, nested first) as class attributes, in the class body
            # where a type checker sees them: `Request.Topic(...)`.
            lines.extend(f"    {n.name} = {n.name}" for n in spec.structs if n is not s)
        params = []
        assigns = []
        for f in s.fields:
            d = default_expr(f)
            if is_mutable_default(f):
                params.append(f"{f.attr}=DEFAULT")
                assigns.append(f"        self.{f.attr} = {d} if {f.attr} is DEFAULT else {f.attr}")
            else:
                params.append(f"{f.attr}={d}")
                assigns.append(f"        self.{f.attr} = {f.attr}")
        sig = ", ".join(["self"] + params + ["_unknown_tagged=None"])
        lines.append("")
        lines.append(f"    def __init__({sig}):")
        lines.extend(assigns)
        lines.append("        self._unknown_tagged = _unknown_tagged")
        lines.append("")
        return "\n".join(lines) + "\n"


def program_default(f: FieldSpec) -> str:
    """A field's default in a field program: `list` and struct classes stand for fresh instances."""
    d = default_expr(f)
    if d == "[]":
        return "list"
    if f.struct is not None and d != "None":
        return f.struct.name
    return d


def program_tuple(items: list[str]) -> str:
    """A tuple of field entries, one a line, inside a _PROGRAMS entry."""
    return "(\n" + "".join(f"        {item},\n" for item in items) + "    )" if items else "()"


# Arrays of fixed-width elements shorter than this are read through precompiled structs.
SHORT_ARRAY = 32
FIXED_SIZE = {"?": 1, "b": 1, "h": 2, "H": 2, "i": 4, "I": 4, "q": 8, "d": 8, "16s": 16}


def module_name(message_name: str) -> str:
    return snake(message_name).rstrip("_")


def render_index(specs: list[MessageSpec], sources: list[Path]) -> str:
    lines = [
        f"# Generated by tools/gen_messages.py from {' + '.join(s.name for s in sources)}; do not edit.",
        '"""Index of the generated message modules: which module holds which message."""',
        "",
        "from enum import IntEnum",
        "",
        "# api key -> (request module, request class, response module, response class)",
        "APIS = {",
    ]
    by_key: dict[int, dict[str, MessageSpec]] = {}
    for s in specs:
        if s.api_key is not None:
            by_key.setdefault(s.api_key, {})[s.type] = s
    for key in sorted(by_key):
        req, resp = by_key[key]["request"], by_key[key]["response"]
        lines.append(
            f"    {key}: ({module_name(req.name)!r}, {req.name!r}, {module_name(resp.name)!r}, {resp.name!r}),"
        )
    lines.append("}")
    lines.append("")
    lines.append("")
    lines.append("class ApiKey(IntEnum):")
    for key in sorted(by_key):
        name = snake(by_key[key]["request"].name[: -len("Request")]).rstrip("_").upper()
        lines.append(f"    {name} = {key}")
    lines.append("")
    lines.append("")
    lines.append("# message name -> module, for headers and data messages")
    lines.append("MODULES = {")
    for s in sorted(specs, key=lambda s: s.name):
        lines.append(f"    {s.name!r}: {module_name(s.name)!r},")
    lines.append("}")
    return "\n".join(lines) + "\n"


def api_key_note(spec: MessageSpec) -> str:
    if spec.api_key is None:
        return ""
    return f", record type {spec.api_key}" if spec.type.startswith("coordinator-") else f", api key {spec.api_key}"


def write_modules(specs: list[MessageSpec], output: Path, index: str) -> None:
    output.mkdir(parents=True, exist_ok=True)
    for old in output.glob("*.py"):
        old.unlink()
    for spec in specs:
        (output / f"{module_name(spec.name)}.py").write_text(ModuleWriter(spec).render())
    (output / "__init__.py").write_text(index)


def generate(source: Path, output: Path, older: Path | None = None) -> int:
    """Write every message module for the schemas in `source`, with the versions `older` defines and
    `source` dropped, into `output`; returns how many."""
    specs = merged_messages(read_schemas(source), read_schemas(older) if older is not None else {})
    write_modules(specs, output, render_index(specs, [source] + ([older] if older is not None else [])))
    return len(specs)


def read_schemas(source: Path, folder: str = "common/message/") -> dict[str, tuple[dict, str]]:
    """Schema name -> (its JSON, where it came from), from a jar's `folder`/*.json or a directory."""
    if source.is_dir():
        return {p.stem: (load_json(p), p.name) for p in sorted(source.glob("*.json"))}
    schemas = {}
    with zipfile.ZipFile(source) as jar:
        for name in sorted(jar.namelist()):
            if name.startswith(folder) and name.endswith(".json"):
                schemas[Path(name).stem] = (schema_json(jar.read(name).decode()), f"{source.name}:{name}")
    return schemas


def merged_messages(newest: dict[str, tuple[dict, str]], older: dict[str, tuple[dict, str]]) -> list[MessageSpec]:
    """The newest schemas, each with the versions its older namesake defines and it dropped."""
    floors = {(d.get("apiKey"), d["type"]): Versions.parse(d["validVersions"]).lo for d, _ in newest.values()}
    for name, (data, source) in older.items():
        if name not in newest and floors.get((data.get("apiKey"), data["type"]), MAX_VERSION) > \
                Versions.parse(data["validVersions"]).lo:  # renamed (ListClientMetricsResources) is fine
            raise ValueError(f"{source}: the newest schemas dropped {name} and versions of it with it")
    specs = []
    for name, (data, source) in newest.items():
        if name not in older:
            specs.append(parse_schema(data, source))
            continue
        old_data, old_source = older[name]
        merged = with_dropped_versions(data, old_data)
        spec = parse_schema(merged, source if merged is data else f"{source} + {old_source}")
        check_merge(spec, parse_schema(data, source), parse_schema(old_data, old_source))
        specs.append(spec)
    return specs


def with_dropped_versions(new: dict, old: dict) -> dict:
    """`new` with the versions below its floor that `old` defines; `new` itself when there are none."""
    new_valid, old_valid = Versions.parse(new["validVersions"]), Versions.parse(old["validVersions"])
    if old.get("latestVersionUnstable"):  # never part of the older Kafka's protocol (share groups' v0)
        old_valid = Versions(old_valid.lo, old_valid.hi - 1)
    if old_valid.empty or (not new_valid.empty and old_valid.lo >= new_valid.lo):
        return new
    if new_valid.empty:  # Kafka 4 defines the api key but no version of it (ZooKeeper's inter-broker apis)
        return {**old, "removedVersions": f"{old_valid.lo}-{old_valid.hi}"}
    merged = dict(new)
    merged["validVersions"] = f"{old_valid.lo}-{new_valid.hi}"
    merged["removedVersions"] = f"{old_valid.lo}-{new_valid.lo - 1}"
    merged["fields"] = merge_fields(new["fields"], old["fields"])
    old_common = {c["name"]: c for c in old.get("commonStructs", [])}
    merged["commonStructs"] = [
        {**c, "fields": merge_fields(c["fields"], old_common[c["name"]]["fields"])} if c["name"] in old_common else c
        for c in new.get("commonStructs", [])
    ]
    return merged


def merge_fields(new: list[dict], old: list[dict]) -> list[dict]:
    """`new`'s fields, and after the field each followed in `old`, the fields only `old` has."""
    result = list(new)
    at = {f["name"]: f for f in new}
    insert = 0
    for f in old:
        if f["name"] in at:
            ours = at[f["name"]]
            if "fields" in ours and "fields" in f:
                merged = {**ours, "fields": merge_fields(ours["fields"], f["fields"])}
                result[result.index(ours)] = merged
                at[f["name"]] = ours = merged
            insert = result.index(ours) + 1
        else:
            result.insert(insert, f)
            insert += 1
    return result


def layout(s: StructSpec, version: int) -> tuple:
    """What decides a struct's bytes at a version: its fields' names, types, nullability, tags."""
    rows = []
    for f in s.fields:
        if version in f.versions:
            rows.append((f.attr, f.is_array, f.type if f.struct is None else None, version in f.nullable,
                         f.tag if version in f.tagged else None, f.default,
                         None if f.flexible_override is None else version in f.flexible_override,
                         None if f.struct is None else layout(f.struct, version)))
    return tuple(rows)


def check_merge(merged: MessageSpec, new: MessageSpec, old: MessageSpec) -> None:
    """Every version of the merged message lays out as the schema it was taken from does."""
    for v in range(merged.valid.lo, merged.valid.hi + 1):
        origin = old if v in merged.removed else new
        if layout(merged.root, v) != layout(origin.root, v) or (v in merged.flexible) != (v in origin.flexible):
            raise ValueError(f"{merged.name} v{v} differs from {origin.source}: "
                             "a field renamed or changed in a dropped version needs a rule here")


def clients_jar(profile: str) -> Path:
    """The kafka-clients jar of a profile of the jar cache; FileNotFoundError when it is missing."""
    return one_jar(jar_cache(profile), "kafka-clients")


# --- coordinator records -------------------------------------------------------------------------

def jar_cache(profile: str = NEWEST_PROFILE) -> Path:
    """Where scripts/fetch-jars.sh keeps a profile's jars."""
    return Path(os.environ.get("SAMSA_CACHE") or Path.home() / ".cache" / "samsa") / profile


def one_jar(directory: Path, name: str) -> Path:
    """The one `name`-<version>.jar in `directory`; FileNotFoundError when there is none or more."""
    found = sorted(directory.glob(f"{name}-[0-9]*.jar"))
    if len(found) != 1:
        raise FileNotFoundError(f"{'no' if not found else 'more than one'} {name} jar in {directory}: "
                                f"run bash scripts/fetch-jars.sh {directory.name}")
    return found[0]


def default_record_sources() -> list[Path]:
    """The coordinator jars of the jar cache; FileNotFoundError when one is missing."""
    return [one_jar(jar_cache(), name) for name in RECORD_JARS]


def coordinator_of(source: Path) -> str:
    """The coordinator whose records a source holds: "group" for kafka-group-coordinator-4.4.0.jar;
    a directory's name otherwise."""
    match = re.fullmatch(r"kafka-(\w+)-coordinator-[\d.]+\.jar", source.name)
    return match.group(1) if match else source.name


def read_record_schemas(source: Path) -> list[MessageSpec]:
    """The record schemas of a coordinator jar (its common/message/*.json) or of a directory."""
    return [parse_schema(data, origin) for data, origin in read_schemas(source).values()]


def render_record_index(by_coordinator: dict[str, list[MessageSpec]], sources: list[Path]) -> str:
    lines = [
        f"# Generated by tools/gen_messages.py from {', '.join(s.name for s in sources)}; do not edit.",
        '"""Index of the generated coordinator records: per coordinator, the key and value of each record type.',
        "",
        "A record's key starts with its type (an int16, the schema's apiKey) and its value with its version",
        '(an int16); wire/coordinator_record.py frames them."""',
        "",
        "# coordinator -> record type -> (key module, key class, value module, value class)",
        "RECORD_TYPES = {",
    ]
    for coordinator, specs in by_coordinator.items():
        keys = {s.api_key: s for s in specs if s.type == "coordinator-key"}
        values = {s.api_key: s for s in specs if s.type == "coordinator-value"}
        if sorted(keys) != sorted(values):
            raise ValueError(f"{coordinator}: record types without both a key and a value: "
                             f"{sorted(set(keys) ^ set(values))}")
        lines.append(f"    {coordinator!r}: {{")
        for record_type in sorted(keys):
            k, v = keys[record_type], values[record_type]
            lines.append(f"        {record_type}: ({module_name(k.name)!r}, {k.name!r}, "
                         f"{module_name(v.name)!r}, {v.name!r}),")
        lines.append("    },")
    lines.append("}")
    return "\n".join(lines) + "\n"


def generate_records(sources: list[Path], output: Path) -> int:
    """Write a module per record schema of the sources into `output`, and their index; returns how many."""
    by_coordinator = {coordinator_of(source): read_record_schemas(source) for source in sources}
    specs = [spec for specs in by_coordinator.values() for spec in specs]
    names = [module_name(spec.name) for spec in specs]
    if len(set(names)) != len(names):
        raise ValueError("two record schemas of the same name")
    write_modules(specs, output, render_record_index(by_coordinator, sources))
    return len(specs)


# --- metadata records ----------------------------------------------------------------------------

def default_metadata_source() -> Path:
    """The kafka-metadata jar of the jar cache; FileNotFoundError when it is missing."""
    return one_jar(jar_cache(), METADATA_JAR)


def render_metadata_index(specs: list[MessageSpec], source: Path) -> str:
    lines = [
        f"# Generated by tools/gen_messages.py from {source.name}; do not edit.",
        '"""Index of the generated metadata records, the records of KRaft\'s `__cluster_metadata` log.',
        "",
        "A record's value is a frame version, the record's api key and version (unsigned varints), then",
        'the record at that version; storage/cluster_metadata.py reads them."""',
        "",
        "# api key -> (module, class)",
        "METADATA_RECORDS = {",
    ]
    by_key = {s.api_key: s for s in specs}
    if len(by_key) != len(specs):
        raise ValueError("two metadata records of the same api key")
    for api_key in sorted(by_key):
        lines.append(f"    {api_key}: ({module_name(by_key[api_key].name)!r}, {by_key[api_key].name!r}),")
    lines.append("}")
    return "\n".join(lines) + "\n"


def generate_metadata_records(source: Path, output: Path) -> int:
    """Write a module per metadata record schema of `source` into `output`, and their index; returns how many."""
    specs = [parse_schema(data, origin) for data, origin in read_schemas(source, "common/metadata/").values()]
    write_modules(specs, output, render_metadata_index(specs, source))
    return len(specs)


def output_option(args: list[str], default: Path) -> Path:
    """The `--output DIR` of the arguments (taken out of them), or `default`."""
    if "--output" not in args:
        return default
    at = args.index("--output")
    output = Path(args[at + 1])
    del args[at:at + 2]
    return output


def main(argv: list[str]) -> None:
    if len(argv) > 1 and argv[1] == "--records":
        args = argv[2:]
        output = output_option(args, RECORDS_OUTPUT)
        sources = [Path(a) for a in args] or default_record_sources()
        count = generate_records(sources, output)
        print(f"generated {count} coordinator record modules into {output}")
        return
    if len(argv) > 1 and argv[1] == "--metadata-records":
        args = argv[2:]
        output = output_option(args, METADATA_RECORDS_OUTPUT)
        source = Path(args[0]) if args else default_metadata_source()
        count = generate_metadata_records(source, output)
        print(f"generated {count} metadata record modules into {output}")
        return
    args = argv[1:]
    older = None
    if "--older" in args:
        at = args.index("--older")
        older = Path(args[at + 1])
        del args[at:at + 2]
    source = Path(args[0]) if args else clients_jar(NEWEST_PROFILE)
    output = Path(args[1]) if len(args) > 1 else OUTPUT
    count = generate(source, output, older or clients_jar(OLDER_PROFILE))
    print(f"generated {count} message modules into {output}")


if __name__ == "__main__":
    main(sys.argv)
