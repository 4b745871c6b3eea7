"""The principal a connection acts as, as Kafka's DefaultKafkaPrincipalBuilder names it.

SASL connections are `User:<authorization id>`; TLS connections with a client certificate are
`User:<distinguished name>` (RFC 2253, as Java's X500Principal.getName prints it) passed through
`ssl.principal.mapping.rules`; everyone else is `User:ANONYMOUS`. A principal travels to the
controller inside a forwarded request's Envelope as the builder's KafkaPrincipalSerde writes it.
"""

from __future__ import annotations

import re
import struct
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ...wire.exceptions import CodecError
from ...wire.protocol import message_class

if TYPE_CHECKING:
    from ..context import KafkaPrincipal

USER_TYPE = "User"  # KafkaPrincipal.USER_TYPE (the principal itself is server.context.KafkaPrincipal)
DefaultPrincipalData = message_class("DefaultPrincipalData")
_VERSION = struct.Struct(">h")


# --- the principal's serde (DefaultKafkaPrincipalBuilder's KafkaPrincipalSerde) ------------------

def serialize_principal(principal: KafkaPrincipal) -> bytes:
    """DefaultKafkaPrincipalBuilder.serialize: DefaultPrincipalData v0 after its version, as
    MessageUtil.toVersionPrefixedBytes writes it."""
    data = DefaultPrincipalData(type_=principal.principal_type, name=principal.name,
                                token_authenticated=principal.token_authenticated)
    return bytes(data.encode(0, bytearray(_VERSION.pack(0))))


def deserialize_principal(data: bytes) -> KafkaPrincipal:
    """DefaultKafkaPrincipalBuilder.deserialize; CodecError for another version or bad data."""
    from ..context import KafkaPrincipal  # server.context imports this package's authorizer

    if len(data) < _VERSION.size:
        raise CodecError("principal data shorter than its version")
    (version,) = _VERSION.unpack_from(data)
    if version != 0:
        raise CodecError(f"Invalid principal data version {version}")
    decoded = DefaultPrincipalData.decode(data, 0, _VERSION.size)
    return KafkaPrincipal(decoded.type_, decoded.name, decoded.token_authenticated)


# --- distinguished names ------------------------------------------------------------------------

# X500Principal.getName(RFC2253) writes these attribute types by keyword, any other by dotted OID
# with the DER encoding of the value in hex.
_KEYWORDS = {
    "2.5.4.3": "CN", "2.5.4.7": "L", "2.5.4.8": "ST", "2.5.4.10": "O", "2.5.4.11": "OU",
    "2.5.4.6": "C", "2.5.4.9": "STREET", "0.9.2342.19200300.100.1.25": "DC",
    "0.9.2342.19200300.100.1.1": "UID",
}
_UTF8_STRING_TAG = 0x0C


def _escape(value: str) -> str:
    out = re.sub(r'([,+"\\<>;])', r"\\\1", value)
    if len(out) > 1 and out.endswith(" "):
        out = out[:-1] + "\\ "
    if out[:1] in ("#", " "):
        out = "\\" + out
    return out


def _der_hex(attribute) -> str:
    data = attribute.value.encode() if isinstance(attribute.value, str) else bytes(attribute.value)
    tag = getattr(getattr(attribute, "_type", None), "value", _UTF8_STRING_TAG)
    length = bytes([len(data)]) if len(data) < 0x80 else bytes([0x80 | 2]) + len(data).to_bytes(2, "big")
    return (bytes([tag]) + length + data).hex()


def distinguished_name(der_certificate: bytes) -> str:
    """The subject of a DER certificate as X500Principal.getName() (RFC 2253) prints it."""
    from cryptography import x509

    subject = x509.load_der_x509_certificate(der_certificate).subject
    rdns = []
    for rdn in reversed(subject.rdns):  # RFC 2253 starts with the most specific name
        parts = []
        for attribute in rdn:
            keyword = _KEYWORDS.get(attribute.oid.dotted_string)
            if keyword is None:
                parts.append(f"{attribute.oid.dotted_string}=#{_der_hex(attribute)}")
            else:
                parts.append(f"{keyword}={_escape(str(attribute.value))}")
        rdns.append("+".join(parts))
    return ",".join(rdns)


# --- ssl.principal.mapping.rules ----------------------------------------------------------------

_RULE = r"(DEFAULT)|RULE:((\\.|[^\\/])*)/((\\.|[^\\/])*)/([LU]?).*?|(.*?)"
_RULE_SPLITTER = re.compile(r"\s*(" + _RULE + r")\s*(,\s*|$)")
_RULE_PARSER = re.compile(_RULE)


class NoMatchingRule(ValueError):
    pass


@dataclass(frozen=True)
class _Rule:
    pattern: re.Pattern | None  # None: DEFAULT
    replacement: str = ""
    case: str = ""  # "L", "U" or ""

    def apply(self, name: str) -> str | None:
        if self.pattern is None:
            return name
        if not self.pattern.fullmatch(name):
            return None
        result = self.pattern.sub(lambda match: _java_replacement(self.replacement, match), name)
        return result.lower() if self.case == "L" else result.upper() if self.case == "U" else result


def _java_replacement(replacement: str, match: re.Match) -> str:
    """Expand a java.util.regex replacement: `$n` is a group (the longest number not beyond the
    group count; beyond it, literal as SslPrincipalMapper makes it), `\\x` is a literal x."""
    groups = match.re.groups
    out = []
    index = 0
    while index < len(replacement):
        char = replacement[index]
        if char == "\\" and index + 1 < len(replacement):
            out.append(replacement[index + 1])
            index += 2
        elif char == "$" and index + 1 < len(replacement) and replacement[index + 1].isdigit():
            end = index + 2
            number = int(replacement[index + 1])
            while end < len(replacement) and replacement[end].isdigit() and number * 10 + int(replacement[end]) <= groups:
                number = number * 10 + int(replacement[end])
                end += 1
            if number > groups:
                out.append(replacement[index:end])
            else:
                out.append(match.group(number) or "")
            index = end
        else:
            out.append(char)
            index += 1
    return "".join(out)


class SslPrincipalMapper:
    """Kafka's SslPrincipalMapper: `DEFAULT` keeps the distinguished name, `RULE:pattern/replacement/[LU]`
    rewrites a name the pattern matches whole; the first rule that applies wins."""

    def __init__(self, rules: str | None) -> None:
        self.rules: list[_Rule] = []
        text = "DEFAULT" if rules is None else rules
        for match in _RULE_SPLITTER.finditer(text.strip()):
            rule = match[1]
            parsed = _RULE_PARSER.match(rule)
            if parsed is None:
                raise ValueError(f"Invalid rule: {rule}")
            if parsed.end() != len(rule):
                raise ValueError(f"Invalid rule: `{rule}`, unmatched substring: `{rule[parsed.end():]}`")
            if parsed[1] is not None:
                self.rules.append(_Rule(None))
            elif parsed[2] is not None:
                try:
                    pattern = re.compile(parsed[2])
                except re.error as error:
                    raise ValueError(f"Invalid rule: {rule}: {error}") from None
                self.rules.append(_Rule(pattern, parsed[4], parsed[6]))

    def name(self, distinguished: str) -> str:
        for rule in self.rules:
            mapped = rule.apply(distinguished)
            if mapped is not None:
                return mapped
        raise NoMatchingRule(f"No rules apply to {distinguished}, rules {self.rules}")
