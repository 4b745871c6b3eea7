"""What a connection raises, and a response's error code as one line of text."""

from __future__ import annotations

from ..wire.errors import ErrorCode


class BrokerUnreachable(Exception):
    """The broker closed the connection, did not answer in time, answered what was not asked, or
    cannot be reached."""


class AuthenticationFailed(Exception):
    """The broker refused a SASL login, or did not prove that it holds the SCRAM credential; the
    message is one line, as error_line writes it."""


def error_line(error_code: int, error_message: str | None = None, subject: str | None = None) -> str:
    """`subject: NAME: message`: the broker's own message when it sent one, else Kafka's text for
    the code (a code this client does not know is named by its number)."""
    try:
        code = ErrorCode(error_code)
        name, default = code.name, code.message
    except ValueError:
        name, default = f"error code {error_code}", "unknown to this client"
    text = f"{name}: {error_message or default}"
    return f"{subject}: {text}" if subject else text
