"""sasl.jaas.config parsing and the PLAIN users it defines."""

from __future__ import annotations

import pytest

from samsa.client.jaas import JaasConfigError, parse_jaas_config, plain_users


def test_options_quoted_and_bare_comments_and_several_modules():
    modules = parse_jaas_config("""
        org.apache.kafka.common.security.plain.PlainLoginModule required
            username="admin" password="a \\"quoted\\" secret" /* comment */
            user_admin="admin-secret" user_alice=alice-secret; // trailing comment
        org.apache.kafka.common.security.scram.ScramLoginModule Optional;
    """)
    assert [(m.name.rsplit(".", 1)[1], m.flag) for m in modules] == [("PlainLoginModule", "required"),
                                                                     ("ScramLoginModule", "optional")]
    assert modules[0].options["password"] == 'a "quoted" secret'
    assert plain_users(modules) == {"admin": "admin-secret", "alice": "alice-secret"}


def test_users_of_other_login_modules_do_not_count():
    assert plain_users(parse_jaas_config('com.example.Other required user_x="y";')) == {}


@pytest.mark.parametrize("text, message", [
    ("", "not terminated by semi-colon"),
    ('org.x.Module required user_a="b"', "not terminated by semi-colon"),
    ('org.x.Module mandatory user_a="b";', "invalid control flag"),
    ('org.x.Module required user_a;', "expected ="),
    ('org.x.Module required ="b";', "expected word"),
])
def test_errors(text, message):
    with pytest.raises(JaasConfigError, match=message):
        parse_jaas_config(text)
