"""`sasl.jaas.config` values, read as Kafka's JaasConfig reads them:
`<login module class> <flag> [<option>=<value> ...];`, once per login module. A client's names its
user and password; a broker listener's PLAIN users are its `user_<name>` options."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

PLAIN_LOGIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"
_FLAGS = ("required", "requisite", "sufficient", "optional")
_TOKEN = re.compile(r"""\s+|//[^\n]*|/\*.*?\*/|(?P<quoted>"(?:\\.|[^"\\])*")|(?P<word>[^\s=;"]+)|(?P<symbol>[=;])""",
                    re.DOTALL)


class JaasConfigError(ValueError):
    pass


@dataclass
class LoginModule:
    name: str
    flag: str
    options: dict[str, str] = field(default_factory=dict)


def _tokens(text: str) -> list[tuple[str, str]]:
    out = []
    position = 0
    while position < len(text):
        match = _TOKEN.match(text, position)
        if match is None:
            raise JaasConfigError(f"Unexpected character {text[position]!r} in JAAS config")
        position = match.end()
        if match["quoted"] is not None:
            out.append(("value", re.sub(r"\\(.)", r"\1", match["quoted"][1:-1])))
        elif match["word"] is not None:
            out.append(("word", match["word"]))
        elif match["symbol"] is not None:
            out.append((match["symbol"], match["symbol"]))
    return out


def parse_jaas_config(text: str) -> list[LoginModule]:
    tokens = _tokens(text)
    modules = []
    index = 0

    def take(*kinds: str) -> str:
        nonlocal index
        if index >= len(tokens) or tokens[index][0] not in kinds:
            found = tokens[index][1] if index < len(tokens) else "end of config"
            raise JaasConfigError(f"Invalid JAAS config: expected {' or '.join(kinds)}, found {found!r}")
        index += 1
        return tokens[index - 1][1]

    while index < len(tokens):
        name = take("word")
        flag = take("word")
        if flag.lower() not in _FLAGS:
            raise JaasConfigError(f"Invalid JAAS config: invalid control flag '{flag}'")
        module = LoginModule(name, flag.lower())
        while True:
            if index >= len(tokens):
                raise JaasConfigError("JAAS config entry not terminated by semi-colon")
            if tokens[index][0] == ";":
                index += 1
                break
            option = take("word")
            take("=")
            module.options[option] = take("word", "value")
        modules.append(module)
    if not modules:
        raise JaasConfigError("JAAS config entry not terminated by semi-colon")
    return modules


def plain_users(modules: list[LoginModule]) -> dict[str, str]:
    """PlainLoginModule's `user_<name>="<password>"` options: the users PLAIN accepts."""
    return {option[len("user_"):]: value
            for module in modules if module.name == PLAIN_LOGIN_MODULE
            for option, value in module.options.items() if option.startswith("user_")}
