"""Kafka's regular expressions (RE2/J) in Python: what RE2/J refuses is refused, the rest is `re`'s."""

from __future__ import annotations

import re

import pytest

from samsa.coordinator import re2j


@pytest.mark.parametrize("pattern", ["txa.*", "(?i)TXA.*", r"tx\w-\d", "[+]+", "[]a]+", r"\++", "(?:a)+", "a*?",
                                     "(?P<name>a)", r"[\1]", "a{2,3}"])
def test_what_re2j_accepts(pattern):
    assert re2j.compile(pattern).pattern == pattern


# Checked against Kafka 4.4's ListTransactions v2 (INVALID_REGULAR_EXPRESSION) where marked.
@pytest.mark.parametrize("pattern", ["[", "(?=t)txa-1", "a++", "(?!x)a", "(?<=a)b", "(?<!a)b", r"(a)\1", "(?>a)",
                                     "a?+", "a{2}+"])
def test_what_re2j_refuses(pattern):
    with pytest.raises(re.error):
        re2j.compile(pattern)
