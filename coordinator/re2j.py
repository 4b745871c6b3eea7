"""Kafka's regular expressions in Python: Kafka compiles the patterns clients send (ListTransactions
v2's TransactionalIdPattern, KIP-1152) with RE2/J, which refuses what needs backtracking. Python's `re`
reads RE2's syntax the same way, but also accepts lookarounds, backreferences, atomic groups,
conditionals and possessive quantifiers: `compile` refuses those as RE2/J does (re.error), so that a
pattern Kafka rejects is rejected here too.
"""

from __future__ import annotations

import re

# Group openers RE2 does not have: lookahead, negative lookahead, lookbehind, negative lookbehind,
# atomic group, conditional.
_UNSUPPORTED_GROUPS = ("(?=", "(?!", "(?<=", "(?<!", "(?>", "(?(")
_QUANTIFIERS = ("*", "+", "?", "}")


def compile(pattern: str) -> re.Pattern:
    """`pattern` compiled by Python's `re`, or re.error where RE2/J would refuse it."""
    _check_re2_syntax(pattern)
    return re.compile(pattern)


def _check_re2_syntax(pattern: str) -> None:
    i, previous = 0, ""  # previous: the last token outside a character class
    while i < len(pattern):
        c = pattern[i]
        if c == "\\":
            escaped = pattern[i + 1:i + 2]
            if escaped and escaped in "123456789":
                raise re.error("invalid escape sequence: backreferences are not supported", pattern, i)
            previous, i = c, i + 2
            continue
        if c == "[":
            previous, i = "]", _class_end(pattern, i)
            continue
        if c == "(" and pattern.startswith(_UNSUPPORTED_GROUPS, i):
            raise re.error("invalid or unsupported Perl syntax", pattern, i)
        if c == "+" and previous in _QUANTIFIERS:
            raise re.error("invalid nested repetition operator", pattern, i)
        previous, i = c, i + 1


def _class_end(pattern: str, i: int) -> int:
    """The index after the character class opening at `i` (a "]" first in it is a literal)."""
    i += 1
    if pattern.startswith("^", i):
        i += 1
    if pattern.startswith("]", i):
        i += 1
    while i < len(pattern) and pattern[i] != "]":
        i += 2 if pattern[i] == "\\" else 1
    return i + 1
