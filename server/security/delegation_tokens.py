"""Delegation tokens (KIP-48, KIP-373): what a token is, the checks and results of creating,
renewing, expiring and describing one, and the cache SCRAM authentication reads (Kafka's
TokenInformation, DelegationTokenControlManager, DelegationTokenManager and DelegationTokenCache).

Pure: no I/O and no clock of its own (every `now` is wall-clock milliseconds, passed in). The
handlers (server/handlers/*_delegation_token.py) decide and answer with it; server/metadata's admin
managers store the results (the single broker's image, or ZooKeeper's /delegation_token/tokens)
and update the cache of every broker.

A token's password is its HMAC: HmacSHA512 of the token id under `delegation.token.secret.key`,
never stored; a client logs in with SCRAM as the token id with the base64 HMAC as password and the
`tokenauth=true` extension, and is then its owner (server/security/scram.py).
"""

from __future__ import annotations

import base64
import hmac as hmac_module
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace

from ...client.scram import ScramMechanism
from ...wire.errors import ErrorCode
from ..context import KafkaPrincipal
from .principal import USER_TYPE
from .scram import ScramCredential

ERROR_TIMESTAMP = -1  # DelegationTokenManager.ERROR_TIMESTAMP
LONG_MAX = 2**63 - 1


def parse_principal(text: str) -> KafkaPrincipal:
    """SecurityUtils.parseKafkaPrincipal: 'Type:name'."""
    principal_type, sep, name = text.partition(":")
    if not sep or not principal_type:
        raise ValueError(f"expected a string in format principalType:principalName but got {text}")
    return KafkaPrincipal(principal_type, name)


def _sum(now: int, duration: int) -> int:
    """DelegationTokenControlManager.sum: saturating at Long.MAX_VALUE."""
    return LONG_MAX if now > LONG_MAX - duration else now + duration


@dataclass(frozen=True)
class TokenInformation:
    token_id: str
    owner: KafkaPrincipal
    requester: KafkaPrincipal
    renewers: tuple[KafkaPrincipal, ...]
    issue_timestamp: int
    max_timestamp: int
    expiry_timestamp: int

    def owner_or_renewer(self, principal: KafkaPrincipal) -> bool:
        """TokenInformation.ownerOrRenewer (the requester counts too): may describe it."""
        return principal in (self.owner, self.requester) or principal in self.renewers

    def allowed_to_renew(self, principal: KafkaPrincipal) -> bool:
        """DelegationTokenControlManager.allowedToRenew: may renew or expire it."""
        return principal == self.owner or principal in self.renewers

    def expired(self, now: int) -> bool:
        return self.max_timestamp < now or self.expiry_timestamp < now

    def to_json(self) -> dict:
        """The metadata image's form (Kafka's DelegationTokenRecord's fields)."""
        return {"token_id": self.token_id, "owner": str(self.owner), "requester": str(self.requester),
                "renewers": [str(r) for r in self.renewers], "issue_timestamp": self.issue_timestamp,
                "max_timestamp": self.max_timestamp, "expiry_timestamp": self.expiry_timestamp}

    @classmethod
    def from_json(cls, data: Mapping) -> TokenInformation:
        return cls(data["token_id"], parse_principal(data["owner"]), parse_principal(data["requester"]),
                   tuple(parse_principal(r) for r in data["renewers"]), int(data["issue_timestamp"]),
                   int(data["max_timestamp"]), int(data["expiry_timestamp"]))


def _spread_hash(text: str) -> int:
    """ConcurrentHashMap.spread(String.hashCode()) of an ASCII string."""
    h = 0
    for ch in text:
        h = (31 * h + ord(ch)) & 0xFFFFFFFF
    return (h ^ (h >> 16)) & 0x7FFFFFFF


def create_hmac(token_id: str, secret_key: str) -> bytes:
    """DelegationTokenManager.createHmac: HmacSHA512(secret key's UTF-8, token id's UTF-8)."""
    return hmac_module.new(secret_key.encode(), token_id.encode(), "sha512").digest()


def new_token_id() -> str:
    """Kafka's Uuid.randomUuid().toString(): url-safe base64 without padding."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")


@dataclass(frozen=True)
class TokenConfig:
    """delegation.token.*: tokens are enabled by a non-empty secret key."""

    secret_key: str | None
    max_lifetime_ms: int = 604800000
    expiry_time_ms: int = 86400000
    expiry_check_interval_ms: int = 3600000

    @property
    def enabled(self) -> bool:
        return bool(self.secret_key)

    @classmethod
    def from_broker_config(cls, config) -> TokenConfig:
        # delegation.token.master.key: Kafka 3.9's deprecated alias, read when the key is unset.
        secret_key = config.get_string("delegation.token.secret.key")
        if secret_key is None:
            secret_key = config.get_string("delegation.token.master.key")
        return cls(secret_key, config.get_int("delegation.token.max.lifetime.ms"),
                   config.get_int("delegation.token.expiry.time.ms"),
                   config.get_int("delegation.token.expiry.check.interval.ms"))


@dataclass(frozen=True)
class Outcome:
    """What a renewal or an expiry decided: the error and expiry timestamp to answer, and the
    change to store (the token with its new expiry, or the id of a token removed)."""

    error: ErrorCode
    # Kafka's controller leaves the response's timestamp at its default (0) with an error; only the
    # broker's own refusals (DELEGATION_TOKEN_REQUEST_NOT_ALLOWED) answer ERROR_TIMESTAMP.
    expiry_timestamp: int = 0
    updated: TokenInformation | None = None
    removed: str | None = None


class DelegationTokens:
    """The tokens the cluster's metadata holds, by id and by HMAC, with each token's SCRAM
    credentials (Kafka's DelegationTokenCache with DelegationTokenControlManager's decisions)."""

    def __init__(self, config: TokenConfig, scram_credential: Callable[[ScramMechanism, str], ScramCredential]
                 | None = None) -> None:
        self.config = config
        self.tokens: dict[str, TokenInformation] = {}
        # The table size of Kafka's ConcurrentHashMap of tokens (it doubles at three quarters full and
        # never shrinks): Kafka describes tokens in its iteration order, by bucket.
        self._table_size = 16
        self._by_hmac: dict[bytes, str] = {}
        self._credentials: dict[tuple[str, ScramMechanism], ScramCredential] = {}
        # Kafka derives each mechanism's credential from the base64 HMAC with a random salt and the
        # mechanism's least iterations (DelegationTokenManager.prepareScramCredentials).
        self._scram_credential = scram_credential or (
            lambda mechanism, password: ScramCredential.from_password(mechanism, password, mechanism.min_iterations))

    @property
    def enabled(self) -> bool:
        return self.config.enabled

    def hmac(self, token_id: str) -> bytes:
        assert self.config.secret_key
        return create_hmac(token_id, self.config.secret_key)

    # --- the cache --------------------------------------------------------------------------------

    def update(self, token: TokenInformation) -> None:
        """A token created or changed (DelegationTokenCache.updateCache); a changed one keeps its place."""
        new = token.token_id not in self.tokens
        self.tokens[token.token_id] = token
        if new:
            if len(self.tokens) >= self._table_size - (self._table_size >> 2):
                self._table_size <<= 1
            if self.enabled:
                self._by_hmac[self.hmac(token.token_id)] = token.token_id

    def remove(self, token_id: str) -> None:
        if self.tokens.pop(token_id, None) is not None and self.enabled:
            self._by_hmac.pop(self.hmac(token_id), None)
        for mechanism in ScramMechanism:
            self._credentials.pop((token_id, mechanism), None)

    def replace_all(self, tokens: Iterable[TokenInformation]) -> None:
        for token_id in list(self.tokens):
            self.remove(token_id)
        for token in tokens:
            self.update(token)

    def token_for_hmac(self, hmac: bytes) -> TokenInformation | None:
        token_id = self._by_hmac.get(bytes(hmac))
        return None if token_id is None else self.tokens.get(token_id)

    def credential(self, token_id: str, mechanism: ScramMechanism) -> ScramCredential | None:
        """The token's SCRAM credential for the mechanism (made on first use), None for an unknown token."""
        if token_id not in self.tokens or not self.enabled:
            return None
        key = (token_id, mechanism)
        if key not in self._credentials:
            password = base64.b64encode(self.hmac(token_id)).decode()
            self._credentials[key] = self._scram_credential(mechanism, password)
        return self._credentials[key]

    def login(self, token_id: str, mechanism: ScramMechanism) -> tuple[ScramCredential | None, str | None, int | None]:
        """ScramServerCallbackHandler's DelegationTokenCredentialCallback: (credential, owner's
        name, expiry timestamp), each None for an unknown token."""
        token = self.tokens.get(token_id)
        if token is None:
            return None, None, None
        return self.credential(token_id, mechanism), token.owner.name, token.expiry_timestamp

    def expired(self, now: int) -> list[TokenInformation]:
        """sweepExpiredDelegationTokens: the tokens past their expiry or maximum timestamp."""
        return [token for token in self.tokens.values() if token.expired(now)]

    # --- DelegationTokenControlManager ------------------------------------------------------------

    def create(self, owner: KafkaPrincipal, requester: KafkaPrincipal, renewers: Iterable[KafkaPrincipal],
               max_lifetime_ms: int, now: int, token_id: str | None = None) -> TokenInformation | ErrorCode:
        """createDelegationToken: the new token (to store), or the error."""
        if not self.enabled:
            return ErrorCode.DELEGATION_TOKEN_AUTH_DISABLED
        max_lifetime = self.config.max_lifetime_ms
        if max_lifetime_ms > 0:
            max_lifetime = min(max_lifetime, max_lifetime_ms)
        max_timestamp = _sum(now, max_lifetime)
        expiry_timestamp = min(max_timestamp, _sum(now, self.config.expiry_time_ms))
        renewers = tuple(renewers)
        if any(r.principal_type != USER_TYPE for r in renewers):
            return ErrorCode.INVALID_PRINCIPAL_TYPE
        return TokenInformation(token_id or new_token_id(), owner, requester, renewers, now, max_timestamp,
                                expiry_timestamp)

    def renew(self, hmac: bytes, principal: KafkaPrincipal, renew_period_ms: int, now: int) -> Outcome:
        """renewDelegationToken."""
        if not self.enabled:
            return Outcome(ErrorCode.DELEGATION_TOKEN_AUTH_DISABLED)
        token = self.token_for_hmac(hmac)
        if token is None:
            return Outcome(ErrorCode.DELEGATION_TOKEN_NOT_FOUND)
        if token.expired(now):
            return Outcome(ErrorCode.DELEGATION_TOKEN_EXPIRED)
        if not token.allowed_to_renew(principal):
            return Outcome(ErrorCode.DELEGATION_TOKEN_OWNER_MISMATCH)
        renew_lifetime = self.config.expiry_time_ms
        if renew_period_ms > 0:
            renew_lifetime = min(renew_lifetime, renew_period_ms)
        expiry = min(token.max_timestamp, now + renew_lifetime)
        return Outcome(ErrorCode.NONE, expiry, replace(token, expiry_timestamp=expiry))

    def expire(self, hmac: bytes, principal: KafkaPrincipal, expiry_time_period_ms: int, now: int) -> Outcome:
        """expireDelegationToken: a negative period removes the token at once."""
        if not self.enabled:
            return Outcome(ErrorCode.DELEGATION_TOKEN_AUTH_DISABLED)
        token = self.token_for_hmac(hmac)
        if token is None:
            return Outcome(ErrorCode.DELEGATION_TOKEN_NOT_FOUND)
        if not token.allowed_to_renew(principal):
            return Outcome(ErrorCode.DELEGATION_TOKEN_OWNER_MISMATCH)
        if expiry_time_period_ms < 0:
            return Outcome(ErrorCode.NONE, now, removed=token.token_id)
        if token.expired(now):
            return Outcome(ErrorCode.DELEGATION_TOKEN_EXPIRED)
        expiry = min(token.max_timestamp, _sum(now, expiry_time_period_ms))
        return Outcome(ErrorCode.NONE, expiry, replace(token, expiry_timestamp=expiry))

    def _in_kafkas_order(self) -> list[TokenInformation]:
        """The tokens as Kafka's ConcurrentHashMap iterates them: by bucket (the spread String
        hash of the id), in insertion order within one."""
        mask = self._table_size - 1
        return sorted(self.tokens.values(), key=lambda token: _spread_hash(token.token_id) & mask)

    def describe(self, requester: KafkaPrincipal, owners: list[KafkaPrincipal] | None,
                 may_describe_token: Callable[[str], bool],
                 may_describe_owner: Callable[[KafkaPrincipal], bool]) -> list[tuple[TokenInformation, bytes]]:
        """DelegationTokenManager.getTokens(filterToken): the tokens of `owners` (None: all) the
        requester may see, with their HMACs."""
        found = []
        for token in self._in_kafkas_order():
            if owners is not None and not any(token.owner_or_renewer(o) for o in owners):
                continue
            if (token.owner_or_renewer(requester) or may_describe_token(token.token_id)
                    or may_describe_owner(token.owner)):
                found.append((token, self.hmac(token.token_id)))
        return found


def allow_token_requests(principal: KafkaPrincipal, security_protocol: str) -> bool:
    """KafkaApis.allowTokenRequests: tokens are neither made nor managed over a connection that a
    token authenticated, nor over PLAINTEXT, nor over SSL without a client certificate; anything
    else answers DELEGATION_TOKEN_REQUEST_NOT_ALLOWED."""
    anonymous = principal == KafkaPrincipal(USER_TYPE, "ANONYMOUS")
    return not (principal.token_authenticated or security_protocol == "PLAINTEXT"
                or security_protocol == "SSL" and anonymous)
