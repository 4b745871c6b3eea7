"""Per-connection authentication state, as Kafka's Authenticator implementations keep it.

`Authenticator` serves listeners without a SASL exchange (PLAINTEXT, SSL): the principal is known
once the connection is up. `SaslServerAuthenticator` follows Kafka's SaslServerAuthenticator:

* Before authentication only ApiVersions (once) and SaslHandshake are served; anything else closes
  the connection, as does a frame larger than `sasl.server.max.receive.size`.
* SaslHandshake v1 means the tokens come in SaslAuthenticate requests; v0 means raw
  size-prefixed tokens with no request header (KIP-152).
* A mechanism not enabled gets UNSUPPORTED_SASL_MECHANISM with the enabled list; failed
  authentication gets SASL_AUTHENTICATION_FAILED with Kafka's message; both close the connection
  after the response (`failure` says why).
* KIP-368: with `connections.max.reauth.ms` the session lasts that long (SaslAuthenticate v1+ says
  so); a SaslHandshake on the authenticated connection starts re-authentication with the same
  mechanism and principal, and a request after the session expired closes the connection.

Times are trio's clock, in seconds, passed in explicitly (`now`).
"""

from __future__ import annotations

import math
from collections.abc import Callable

from ...wire.errors import ErrorCode
from ...wire.protocol import ApiKey
from ..context import ANONYMOUS, KafkaPrincipal
from .principal import USER_TYPE
from .sasl import SaslAuthenticationException, SaslException, SaslServer

MIN_REAUTH_INTERVAL_S = 1.0  # KafkaChannel.MIN_REAUTH_INTERVAL_ONE_SECOND_NANOS


class AuthenticationFailed(Exception):
    """The connection must be closed (without a response to the frame at hand)."""


class Authenticator:
    """A connection authenticated from the start (PLAINTEXT, or SSL by its client certificate)."""

    # Set when authentication failed: the response in flight is the last one, and the connection
    # closes after it (following connection.failed.authentication.delay.ms, as in Kafka).
    failure: str | None = None
    # Until when (trio clock) the client has to finish authenticating.
    deadline = math.inf

    def __init__(self, principal: KafkaPrincipal = ANONYMOUS) -> None:
        self.principal = principal

    @property
    def complete(self) -> bool:
        return True

    @property
    def expects_raw_token(self) -> bool:
        """True while the next frame is a raw SASL token (after a v0 SaslHandshake), not a request."""
        return False

    def receive_limit(self, request_max_bytes: int) -> tuple[int, str]:
        """The largest frame the client may send now, and the config that says so."""
        return request_max_bytes, "socket.request.max.bytes"

    def admit(self, api_key: int, api_version: int, now: float) -> None:
        """Check that a request may be served now; AuthenticationFailed closes the connection."""

    def handshake(self, api_version: int, mechanism: str, now: float) -> tuple[int, list[str]]:
        """SaslHandshake: (error code, enabled mechanisms). Outside an exchange, as KafkaApis answers."""
        return ErrorCode.ILLEGAL_SASL_STATE, []

    def authenticate(self, api_version: int, token: bytes, now: float) -> tuple[int, str | None, bytes, int]:
        """SaslAuthenticate: (error code, error message, token, session lifetime ms)."""
        return ErrorCode.ILLEGAL_SASL_STATE, "SaslAuthenticate request received after successful authentication", b"", 0

    def evaluate_raw_token(self, token: bytes, now: float) -> bytes:
        raise AuthenticationFailed("unexpected SASL token")


# SaslServerAuthenticator's states.
INITIAL_REQUEST = "INITIAL_REQUEST"
HANDSHAKE_OR_VERSIONS_REQUEST = "HANDSHAKE_OR_VERSIONS_REQUEST"
HANDSHAKE_REQUEST = "HANDSHAKE_REQUEST"
AUTHENTICATE = "AUTHENTICATE"
COMPLETE = "COMPLETE"
FAILED = "FAILED"
REAUTH_PROCESS_HANDSHAKE = "REAUTH_PROCESS_HANDSHAKE"
REAUTH_BAD_MECHANISM = "REAUTH_BAD_MECHANISM"


class SaslServerAuthenticator(Authenticator):
    def __init__(self, mechanisms: list[str], new_server: Callable[[str], SaslServer],
                 reauth_ms: Callable[[str], int], max_receive_size: int, timeout: float, now: float,
                 api_versions_supported: Callable[[int], bool]) -> None:
        super().__init__(ANONYMOUS)
        self.mechanisms = mechanisms
        self._new_server = new_server
        self._reauth_ms = reauth_ms
        self._max_receive_size = max_receive_size
        self._timeout = timeout
        self._api_versions_supported = api_versions_supported
        self.state = INITIAL_REQUEST
        self.deadline = now + timeout
        self.mechanism: str | None = None
        self._server: SaslServer | None = None
        self._kafka_headers = False
        self.session_expiration: float | None = None
        self._last_reauth_start: float | None = None
        self._reauth_from: tuple[str, KafkaPrincipal] | None = None  # (mechanism, principal) being renewed
        self._bad_mechanism_message = ""

    @property
    def complete(self) -> bool:
        return self.state == COMPLETE

    @property
    def expects_raw_token(self) -> bool:
        return self.state == AUTHENTICATE and not self._kafka_headers

    @property
    def _what(self) -> str:
        return "re-authentication" if self._reauth_from else "authentication"

    def receive_limit(self, request_max_bytes: int) -> tuple[int, str]:
        if self.state == COMPLETE:
            return super().receive_limit(request_max_bytes)
        return self._max_receive_size, "sasl.server.max.receive.size"

    def admit(self, api_key: int, api_version: int, now: float) -> None:
        state = self.state
        if state == COMPLETE:
            if api_key == ApiKey.SASL_HANDSHAKE and self._maybe_begin_reauthentication(now):
                return
            if self.session_expiration is not None and now >= self.session_expiration:
                raise AuthenticationFailed("the authentication session expired")
            return
        if state in (INITIAL_REQUEST, HANDSHAKE_OR_VERSIONS_REQUEST) and api_key == ApiKey.API_VERSIONS:
            # One good ApiVersions; a client may retry after an unsupported version (KIP-511).
            supported = self._api_versions_supported(api_version)
            self.state = HANDSHAKE_REQUEST if supported else HANDSHAKE_OR_VERSIONS_REQUEST
            return
        if api_key == ApiKey.SASL_HANDSHAKE and state in (INITIAL_REQUEST, HANDSHAKE_OR_VERSIONS_REQUEST,
                                                          HANDSHAKE_REQUEST, REAUTH_PROCESS_HANDSHAKE):
            return
        if api_key == ApiKey.SASL_AUTHENTICATE and state == AUTHENTICATE and self._kafka_headers:
            return
        if state == REAUTH_BAD_MECHANISM:
            raise AuthenticationFailed(self._bad_mechanism_message)
        self.state = FAILED
        raise AuthenticationFailed(f"Unexpected Kafka request of type {ApiKey(api_key).name} during SASL "
                                   f"{'handshake' if state != AUTHENTICATE else 'authentication'}.")

    def _maybe_begin_reauthentication(self, now: float) -> bool:
        if self.session_expiration is None:
            return False  # re-authentication is off: KafkaApis answers ILLEGAL_SASL_STATE
        if self._last_reauth_start is not None and now - self._last_reauth_start < MIN_REAUTH_INTERVAL_S:
            return False
        self._last_reauth_start = now
        assert self.mechanism is not None
        self._reauth_from = (self.mechanism, self.principal)
        self.state = REAUTH_PROCESS_HANDSHAKE
        self.deadline = now + self._timeout
        return True

    def handshake(self, api_version: int, mechanism: str, now: float) -> tuple[int, list[str]]:
        if self.state == COMPLETE:
            return super().handshake(api_version, mechanism, now)
        if api_version >= 1:
            self._kafka_headers = True
        if mechanism not in self.mechanisms:
            self.state = FAILED
            self.failure = f"Unsupported SASL mechanism {mechanism}"
            return ErrorCode.UNSUPPORTED_SASL_MECHANISM, list(self.mechanisms)
        if self._reauth_from is not None and self._reauth_from[0] != mechanism:
            self._bad_mechanism_message = (f"SASL mechanism '{mechanism}' requested by client is not supported for "
                                           f"re-authentication of mechanism '{self._reauth_from[0]}'")
            self.state = REAUTH_BAD_MECHANISM
            return ErrorCode.NONE, list(self.mechanisms)
        self.mechanism = mechanism
        self._server = self._new_server(mechanism)
        self.state = AUTHENTICATE
        return ErrorCode.NONE, list(self.mechanisms)

    def authenticate(self, api_version: int, token: bytes, now: float) -> tuple[int, str | None, bytes, int]:
        if self.state != AUTHENTICATE:
            return super().authenticate(api_version, token, now)
        try:
            response = self._evaluate(token, now)
        except (SaslAuthenticationException, SaslException) as error:
            self.state = FAILED
            self.failure = self._client_message(error)
            return ErrorCode.SASL_AUTHENTICATION_FAILED, self.failure, b"", 0
        lifetime_ms = 0
        if self.state == COMPLETE and self.session_expiration is not None:
            lifetime_ms = round((self.session_expiration - now) * 1000)
        return ErrorCode.NONE, None, response, lifetime_ms

    def evaluate_raw_token(self, token: bytes, now: float) -> bytes:
        try:
            return self._evaluate(token, now)
        except (SaslAuthenticationException, SaslException) as error:
            self.state = FAILED
            raise AuthenticationFailed(self._client_message(error)) from error

    def _client_message(self, error: Exception) -> str:
        if isinstance(error, SaslAuthenticationException):
            return str(error)
        # Kafka never tells the client more than this: the details may reveal which users exist.
        return f"Authentication failed during {self._what} due to invalid credentials with SASL mechanism {self.mechanism}"

    def _evaluate(self, token: bytes, now: float) -> bytes:
        assert self._server is not None and self.mechanism is not None
        response = self._server.evaluate(bytes(token))
        if self._server.complete:
            # Only a SCRAM server has token_authenticated (a delegation token's login).
            principal = KafkaPrincipal(USER_TYPE, self._server.authorization_id or "",
                                       getattr(self._server, "token_authenticated", False))
            if self._reauth_from is not None and principal != self._reauth_from[1]:
                previous = self._reauth_from[1]
                raise SaslAuthenticationException(
                    f"Cannot change principals during re-authentication from {previous.principal_type}.{previous.name}: "
                    f"{principal.principal_type}.{principal.name}")
            self.principal = principal
            # Kafka's SaslServerAuthenticator: the session ends at connections.max.reauth.ms or when
            # the credential expires, whichever comes first.
            reauth_ms = self._reauth_ms(self.mechanism)
            lifetimes = [ms for ms in (reauth_ms if reauth_ms > 0 else None, self._server.credential_lifetime_ms)
                         if ms is not None]
            self.session_expiration = now + max(0, min(lifetimes)) / 1000 if lifetimes else None
            self.state = COMPLETE
            self.deadline = math.inf
            self._reauth_from = None
            self._server = None
        return response
