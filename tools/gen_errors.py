"""Generate wire/errors.py from Apache Kafka's error codes, read from the kafka-clients jar.

Usage: python tools/gen_errors.py [KAFKA_CLIENTS_JAR]
       (default: the kafka-clients jar of the kafka4 profile of scripts/fetch-jars.sh, in
       $SAMSA_CACHE/kafka4 or ~/.cache/samsa/kafka4, as tools/gen_messages.py reads its schemas)

Kafka's error codes are Java code, not data: the enum org.apache.kafka.common.protocol.Errors, whose
constants are `NAME(code, "message", SomeException::new)`. Running a JVM at generation and test time
to list them is slow, so this reads Errors.class itself: javac compiles the constants into the static
initialiser as `new Errors; dup; ldc "NAME"; <ordinal>; <code>; ldc "message" (or aconst_null);
invokedynamic (the exception's constructor); invokespecial Errors.<init>`, so walking that bytecode
with a stack of the constants pushed gives (code, name, message) per constant, and the invokedynamic's
bootstrap arguments name the exception class. A code is retriable when its exception class descends
from org.apache.kafka.common.errors.RetriableException (what Kafka's clients test), read from the
superclass chain of the classes in the same jar.
"""

from __future__ import annotations

import os
import struct
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
NEWEST_PROFILE = "kafka4"
ERRORS_CLASS = "org/apache/kafka/common/protocol/Errors"
RETRIABLE_CLASS = "org/apache/kafka/common/errors/RetriableException"


def clients_jar(profile: str = NEWEST_PROFILE) -> Path:
    """The kafka-clients jar of a profile of the jar cache; FileNotFoundError when it is missing."""
    directory = Path(os.environ.get("SAMSA_CACHE") or Path.home() / ".cache" / "samsa") / profile
    found = sorted(directory.glob("kafka-clients-[0-9]*.jar"))
    if len(found) != 1:
        raise FileNotFoundError(f"{'no' if not found else 'more than one'} kafka-clients jar in {directory}: "
                                f"run bash scripts/fetch-jars.sh {profile}")
    return found[0]


# --- class files (JVMS chapter 4) ---------------------------------------------------------------

class ClassFile:
    """The parts of a class file read here: constant pool, superclass, methods' code, bootstrap methods."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 8  # magic, minor, major
        count = self.u2()
        self.pool: list[tuple] = [()]
        while len(self.pool) < count:
            tag = self.u1()
            if tag == 1:  # Utf8 (modified UTF-8; Kafka's messages are ASCII)
                n = self.u2()
                self.pool.append((tag, self.take(n).decode("utf-8", "surrogatepass")))
            elif tag in (3, 4):  # Integer, Float
                self.pool.append((tag, self.take(4)))
            elif tag in (5, 6):  # Long, Double take two slots
                self.pool += [(tag, self.take(8)), ()]
            elif tag in (7, 8, 16, 19, 20):  # Class, String, MethodType, Module, Package
                self.pool.append((tag, self.u2()))
            elif tag == 15:  # MethodHandle: kind, reference
                self.pool.append((tag, self.u1(), self.u2()))
            elif tag in (9, 10, 11, 12, 17, 18):  # refs, NameAndType, (Invoke)Dynamic
                self.pool.append((tag, self.u2(), self.u2()))
            else:
                raise ValueError(f"constant pool tag {tag} unknown")
        self.pos += 2  # access flags
        self.this_class = self.class_name(self.u2())
        super_index = self.u2()
        self.super_class = self.class_name(super_index) if super_index else None
        interfaces = self.u2()
        self.pos += 2 * interfaces
        for _ in range(self.u2()):  # fields
            self.pos += 6
            self.skip_attributes()
        self.code: dict[str, bytes] = {}
        for _ in range(self.u2()):
            self.pos += 2
            name = self.utf8(self.u2())
            self.pos += 2
            for attr_name, body in self.attributes():
                if attr_name == "Code":
                    code_length = struct.unpack_from(">I", body, 4)[0]
                    self.code[name] = body[8:8 + code_length]
        self.bootstrap: list[list[int]] = []
        for attr_name, body in self.attributes():
            if attr_name == "BootstrapMethods":
                at = 2
                for _ in range(struct.unpack_from(">H", body)[0]):
                    _, nargs = struct.unpack_from(">HH", body, at)
                    self.bootstrap.append(list(struct.unpack_from(f">{nargs}H", body, at + 4)))
                    at += 4 + 2 * nargs

    def u1(self) -> int:
        self.pos += 1
        return self.data[self.pos - 1]

    def u2(self) -> int:
        self.pos += 2
        return int(struct.unpack_from(">H", self.data, self.pos - 2)[0])

    def take(self, n: int) -> bytes:
        self.pos += n
        return self.data[self.pos - n:self.pos]

    def attributes(self) -> list[tuple[str, bytes]]:
        found = []
        for _ in range(self.u2()):
            name = self.utf8(self.u2())
            found.append((name, self.take(struct.unpack(">I", self.take(4))[0])))
        return found

    def skip_attributes(self) -> None:
        self.attributes()

    def utf8(self, index: int) -> str:
        return str(self.pool[index][1])

    def class_name(self, index: int) -> str:
        return self.utf8(self.pool[index][1])

    def member(self, index: int) -> tuple[str, str]:
        """A Fieldref/Methodref's (class, name)."""
        _, class_index, name_and_type = self.pool[index]
        return self.class_name(class_index), self.utf8(self.pool[name_and_type][1])


# Instruction lengths (opcode included) of the fixed-length JVM instructions; the switches and `wide`
# are handled where they are read.
_LENGTHS = bytearray([1] * 256)
for _ops, _n in (((0x10, 0x12, 0x15, 0x16, 0x17, 0x18, 0x19, 0x36, 0x37, 0x38, 0x39, 0x3A, 0xA9, 0xBC), 2),
                 ((0x11, 0x13, 0x14, 0x84, 0x99, 0x9A, 0x9B, 0x9C, 0x9D, 0x9E, 0x9F, 0xA0, 0xA1, 0xA2, 0xA3,
                   0xA4, 0xA5, 0xA6, 0xA7, 0xA8, 0xB2, 0xB3, 0xB4, 0xB5, 0xB6, 0xB7, 0xB8, 0xBB, 0xBD, 0xC0,
                   0xC1, 0xC6, 0xC7), 3),
                 ((0xC5,), 4), ((0xB9, 0xBA, 0xC8, 0xC9), 5)):
    for _op in _ops:
        _LENGTHS[_op] = _n


def enum_constants(errors: ClassFile) -> list[tuple[int, str, str | None, str | None]]:
    """(code, name, message, exception class) of each Errors constant, from Errors.<clinit>."""
    code = errors.code["<clinit>"]
    constants = []
    stack: list[object] = []
    pc = 0
    while pc < len(code):
        op = code[pc]
        if op == 0xAA or op == 0xAB:  # tableswitch, lookupswitch: padded to 4, then their tables
            at = pc + 1 + (-(pc + 1) % 4)
            if op == 0xAA:
                low, high = struct.unpack_from(">ii", code, at + 4)
                pc = at + 12 + 4 * (high - low + 1)
            else:
                pc = at + 8 + 8 * struct.unpack_from(">i", code, at + 4)[0]
            continue
        if op == 0xC4:  # wide
            pc += 6 if code[pc + 1] == 0x84 else 4
            continue
        index = struct.unpack_from(">H", code, pc + 1)[0] if _LENGTHS[op] >= 3 else 0
        if op == 0xBB and errors.class_name(index) == ERRORS_CLASS:  # new Errors
            stack = []
        elif 0x02 <= op <= 0x08:  # iconst_m1 .. iconst_5
            stack.append(op - 0x03)
        elif op == 0x10:  # bipush
            stack.append(struct.unpack_from(">b", code, pc + 1)[0])
        elif op == 0x11:  # sipush
            stack.append(struct.unpack_from(">h", code, pc + 1)[0])
        elif op == 0x01:  # aconst_null
            stack.append(None)
        elif op in (0x12, 0x13):  # ldc, ldc_w
            constant = errors.pool[code[pc + 1] if op == 0x12 else index]
            stack.append(errors.utf8(constant[1]) if constant[0] == 8 else constant)
        elif op == 0xBA:  # invokedynamic: the exception class its method handle constructs, if any
            stack.append(lambda_target(errors, errors.pool[index][1]))
        elif op == 0xB7 and errors.member(index) == (ERRORS_CLASS, "<init>"):
            name, _ordinal, number, message, exception = stack[-5:]
            assert isinstance(name, str) and isinstance(number, int), stack
            constants.append((number, name, message, exception))  # type: ignore[arg-type]
            stack = []
        pc += _LENGTHS[op]
    return constants


def lambda_target(cls: ClassFile, bootstrap_index: int) -> str | None:
    """The class whose constructor an invokedynamic's `X::new` names; None for any other lambda."""
    for arg in cls.bootstrap[bootstrap_index]:
        constant = cls.pool[arg]
        if constant[0] == 15 and constant[1] == 8:  # MethodHandle REF_newInvokeSpecial
            return cls.member(constant[2])[0]
    return None


def read_errors(jar: Path) -> tuple[list[tuple[int, str, str]], list[str]]:
    """Kafka's (code, name, message) rows and the names of the retriable codes, from a kafka-clients jar."""
    with zipfile.ZipFile(jar) as z:
        classes: dict[str, ClassFile] = {}

        def load(name: str) -> ClassFile | None:
            if name not in classes:
                try:
                    classes[name] = ClassFile(z.read(name + ".class"))
                except KeyError:  # a JDK class (java/lang/...): not Kafka's
                    return None
            return classes[name]

        def retriable(name: str | None) -> bool:
            while name is not None and name != RETRIABLE_CLASS:
                cls = load(name)
                name = cls.super_class if cls is not None else None
            return name == RETRIABLE_CLASS

        errors = load(ERRORS_CLASS)
        assert errors is not None
        constants = sorted(enum_constants(errors))
        rows = [(number, name, message or "") for number, name, message, _ in constants]
        return rows, [name for _, name, _, exception in constants if retriable(exception)]


def render(rows: list[tuple[int, str, str]], retriable: list[str], source: str) -> str:
    lines = [
        f"# Generated by tools/gen_errors.py from {source}'s org.apache.kafka.common.protocol.Errors; do not edit.",
        '"""Kafka protocol error codes: `ErrorCode.NAME` is the wire value, `.message` Kafka\'s text."""',
        "",
        "from enum import IntEnum",
        "",
        "",
        "class ErrorCode(IntEnum):",
    ]
    lines += [f"    {name} = {code}" for code, name, _ in rows]
    lines += [
        "",
        "    @property",
        "    def message(self) -> str:",
        "        return MESSAGES[self]",
        "",
        "    @property",
        "    def retriable(self) -> bool:",
        "        return self in RETRIABLE",
        "",
        "",
        "MESSAGES: dict[int, str] = {",
    ]
    lines += [f"    {code}: {msg!r}," for code, _, msg in rows]
    lines += ["}", "", "RETRIABLE = frozenset({"]
    lines += [f"    ErrorCode.{name}," for name in retriable]
    lines += ["})", ""]
    return "\n".join(lines)


def generate(jar: Path) -> str:
    """wire/errors.py's text from the kafka-clients jar at `jar`."""
    rows, retriable = read_errors(jar)
    return render(rows, retriable, jar.name)


def main(argv: list[str]) -> None:
    jar = Path(argv[1]) if len(argv) > 1 else clients_jar()
    (ROOT / "wire" / "errors.py").write_text(generate(jar))


if __name__ == "__main__":
    main(sys.argv)
