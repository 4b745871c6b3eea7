"""Principals: distinguished names as Java prints them, and ssl.principal.mapping.rules."""

from __future__ import annotations

import pytest
from cryptography.hazmat.primitives import serialization

from samsa.server.security.principal import NoMatchingRule, SslPrincipalMapper, distinguished_name

from tls_certs import make_certificates


@pytest.mark.parametrize("attributes, expected", [
    ([("CN", "alice")], "CN=alice"),
    ([("C", "SE"), ("ST", "Stockholm"), ("L", "Kista"), ("O", "Samsa"), ("OU", "Eng"), ("CN", "alice")],
     "CN=alice,OU=Eng,O=Samsa,L=Kista,ST=Stockholm,C=SE"),
    ([("O", 'A, "B" + <C>; D\\'), ("CN", " #x ")], 'CN=\\ #x\\ ,O=A\\, \\"B\\" \\+ \\<C\\>\\; D\\\\'),
    ([("CN", "bob"), ("emailAddress", "bob@example.com")],
     "1.2.840.113549.1.9.1=#160f626f62406578616d706c652e636f6d,CN=bob"),
])
def test_distinguished_name_as_x500principal_prints_it(tmp_path, attributes, expected):
    certs = make_certificates(tmp_path)
    cert_path, _ = certs.client("c", attributes)
    from cryptography import x509

    der = x509.load_pem_x509_certificate(cert_path.read_bytes()).public_bytes(serialization.Encoding.DER)
    assert distinguished_name(der) == expected


@pytest.mark.parametrize("rules, name, expected", [
    (None, "CN=alice,OU=Eng", "CN=alice,OU=Eng"),
    ("DEFAULT", "CN=alice,OU=Eng", "CN=alice,OU=Eng"),
    ("RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/,DEFAULT", "CN=Kafka,OU=ServiceUsers,O=X", "Kafka"),
    ("RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/,DEFAULT", "CN=alice,OU=Eng", "CN=alice,OU=Eng"),
    ("RULE:^CN=(.*?),OU=(.*?)$/$1@$2/L", "CN=Alice,OU=Eng", "alice@eng"),
    ("RULE:^CN=(.*?),OU=(.*?)$/$1@$2/U", "CN=Alice,OU=Eng", "ALICE@ENG"),
    ("RULE:^CN=(.*)$/$1-$2/", "CN=x", "x-$2"),  # a group beyond the pattern's is literal
    ("RULE:^CN=(.*)$/\\$1/", "CN=x", "$1"),
    ("  RULE:^CN=(.*)$/$1/ , DEFAULT  ", "CN=x", "x"),
    ("RULE:^.*[,]OU=(.*)$/ou:$1/", "CN=x,OU=y", "ou:y"),
])
def test_mapping_rules(rules, name, expected):
    assert SslPrincipalMapper(rules).name(name) == expected


def test_no_rule_applies():
    with pytest.raises(NoMatchingRule, match="No rules apply to CN=x"):
        SslPrincipalMapper("RULE:^OU=(.*)$/$1/").name("CN=x")


@pytest.mark.parametrize("rules", ["RULE:^CN=(.*)$/$1/Q", "NOT A RULE", "RULE:(/x/"])
def test_invalid_rules(rules):
    with pytest.raises(ValueError, match="Invalid rule"):
        SslPrincipalMapper(rules)
