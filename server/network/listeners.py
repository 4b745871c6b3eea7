"""What each listener needs to secure its connections, built once from the config (Kafka's
ChannelBuilders): a TLS context for SSL and SASL_SSL, the SASL mechanisms and their users for
SASL_PLAINTEXT and SASL_SSL, the principal builder's mapping rules. A bad value stops the broker
with a ConfigError naming the key.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

import trio

from ...client.scram import ScramMechanism
from ...client.jaas import JaasConfigError, parse_jaas_config, plain_users
from ...wire.protocol import ApiKey
from ..clock import loop_time, wall_clock_ms
from ..config.kafka_config import ConfigError
from ..handlers import HANDLERS
from .socket_server import Connection, ConnectionClosed
from ..security.authenticator import Authenticator, SaslServerAuthenticator
from .listener_config import ListenerConfig
from ..config.system_properties import ALLOWED_SASL_OAUTHBEARER_URLS, system_property
from ..security.oauthbearer import OAuthBearerServer, UnsecuredValidatorOptions, ValidatedToken, validate_unsecured
from ..security.plain import PlainServer
from ..context import ANONYMOUS, KafkaPrincipal
from ..security.principal import USER_TYPE, NoMatchingRule, SslPrincipalMapper, distinguished_name
from ..security.sasl import OAUTHBEARER, PLAIN, SUPPORTED_MECHANISMS, SaslServer
from ..security.scram import ScramCredential, ScramServer, TokenLogin
from .tls import server_context

if TYPE_CHECKING:
    from ..security.jwks import JwksSource
    from ..security.jwt_validator import BrokerJwtOptions

log = logging.getLogger(__name__)

# Kafka has no server-side limit on how long a client may take to authenticate (only
# connections.max.idle.ms); Samsa bounds the TLS handshake and the SASL exchange together so that
# an unauthenticated client cannot hold a connection slot for long.
AUTHENTICATION_TIMEOUT_S = 30.0
DEFAULT_PRINCIPAL_BUILDER = "org.apache.kafka.common.security.authenticator.DefaultKafkaPrincipalBuilder"
# Kafka's default server callback for OAUTHBEARER, and the one that validates JWTs against a JWKS
# (KIP-768) with its JWT validator, the default one (BrokerJwtValidator once a JWKS URL is set).
UNSECURED_VALIDATOR = ("org.apache.kafka.common.security.oauthbearer.internals.unsecured."
                       "OAuthBearerUnsecuredValidatorCallbackHandler")
JWT_VALIDATOR_CALLBACK = "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler"
JWT_VALIDATORS = ("org.apache.kafka.common.security.oauthbearer.DefaultJwtValidator",
                  "org.apache.kafka.common.security.oauthbearer.BrokerJwtValidator")

ScramCredentials = Callable[[str, ScramMechanism], "ScramCredential | None"]
# The JWKS sources of the broker's listeners, by URL and refresh settings: listeners configured
# alike share one, as Kafka's VerificationKeyResolverFactory shares its resolvers.
JwksSources = dict[tuple, "JwksSource"]


class ListenerSecurity:
    def __init__(self, config, listener: str, security_protocol: str, scram_credential: ScramCredentials,
                 jwks_sources: JwksSources | None = None, token_login: TokenLogin | None = None) -> None:
        self.config = ListenerConfig(config, listener)
        self._jwks_sources = {} if jwks_sources is None else jwks_sources
        self.jwks: JwksSource | None = None
        self.security_protocol = security_protocol
        self.authentication_timeout = AUTHENTICATION_TIMEOUT_S
        self._scram_credential = scram_credential
        self._token_login = token_login
        self.ssl_context = (server_context(self.config, security_protocol)
                            if security_protocol in ("SSL", "SASL_SSL") else None)
        rules_key = self.config.key("ssl.principal.mapping.rules")
        try:
            self.principal_mapper = SslPrincipalMapper(self.config.config.get(rules_key))
        except ValueError as error:
            raise ConfigError(rules_key, str(error)) from None
        builder_key = self.config.key("principal.builder.class")
        if self.config.config.get(builder_key) != DEFAULT_PRINCIPAL_BUILDER:
            raise ConfigError(builder_key, f"{builder_key}: only {DEFAULT_PRINCIPAL_BUILDER} is supported")
        self.sasl = security_protocol in ("SASL_PLAINTEXT", "SASL_SSL")
        self.mechanisms: list[str] = self._enabled_mechanisms() if self.sasl else []
        self.plain_users: dict[str, str] = self._plain_users() if PLAIN in self.mechanisms else {}
        self.oauthbearer = self._oauthbearer_validator() if OAUTHBEARER in self.mechanisms else None
        self.max_receive_size = self.config.get("sasl.server.max.receive.size")

    def _enabled_mechanisms(self) -> list[str]:
        key = self.config.key("sasl.enabled.mechanisms")
        mechanisms = [m for m in self.config.config.get(key) if m]
        if not mechanisms:
            raise ConfigError(key, f"No SASL mechanisms are enabled ({key})")
        unsupported = [m for m in mechanisms if m not in SUPPORTED_MECHANISMS]
        if unsupported:
            raise ConfigError(key, f"SASL mechanism {unsupported[0]} in {key} is not supported; Samsa supports "
                                   f"{', '.join(SUPPORTED_MECHANISMS)}")
        return list(dict.fromkeys(mechanisms))

    def _plain_users(self) -> dict[str, str]:
        # Kafka reads listener.name.<listener>.plain.sasl.jaas.config; Samsa also takes a plain
        # sasl.jaas.config, standing in for the KafkaServer section of a static JAAS file.
        key = self.config.key("sasl.jaas.config", PLAIN)
        text = self.config.config.get(key)
        if text is None:
            raise ConfigError(f"{self.config.prefix}plain.sasl.jaas.config",
                              f"SASL/PLAIN on listener {self.config.listener} needs its users: set "
                              f"{self.config.prefix}plain.sasl.jaas.config to "
                              "org.apache.kafka.common.security.plain.PlainLoginModule required user_<name>=\"<password>\";")
        try:
            return plain_users(parse_jaas_config(str(text)))
        except JaasConfigError as error:
            raise ConfigError(key, f"{key}: {error}") from None

    def _oauthbearer_validator(self) -> Callable[[str], ValidatedToken]:
        """How the listener validates an OAUTHBEARER token: its server callback handler
        (listener.name.<l>.oauthbearer.sasl.server.callback.handler.class), the unsecured one by
        default."""
        handler_key = self.config.key("sasl.server.callback.handler.class", OAUTHBEARER)
        handler = self.config.config.get(handler_key)
        if handler in (None, UNSECURED_VALIDATOR):
            options = self._unsecured_options()
            return lambda token: validate_unsecured(token, options, wall_clock_ms())
        if handler == JWT_VALIDATOR_CALLBACK:
            jwks, jwt_options = self._jwt_validator()
            self.jwks = jwks
            return lambda token: jwks.validate(token, jwt_options, wall_clock_ms())
        raise ConfigError(handler_key, f"{handler_key}: only {UNSECURED_VALIDATOR} and {JWT_VALIDATOR_CALLBACK} are "
                                       "supported for OAUTHBEARER")

    def _login_module_options(self) -> tuple[str, dict[str, str]]:
        """The options of the listener's OAuthBearerLoginModule
        (listener.name.<l>.oauthbearer.sasl.jaas.config, or sasl.jaas.config; none: no options),
        and the key they come from."""
        key = self.config.key("sasl.jaas.config", OAUTHBEARER)
        text = self.config.config.get(key)
        try:
            return key, {name: value for module in parse_jaas_config(str(text)) for name, value in module.options.items()
                         } if text is not None else {}
        except JaasConfigError as error:
            raise ConfigError(key, f"{key}: {error}") from None

    def _unsecured_options(self) -> UnsecuredValidatorOptions:
        key, options = self._login_module_options()
        try:
            return UnsecuredValidatorOptions.from_jaas(options)
        except ValueError as error:
            raise ConfigError(key, f"{key}: {error}") from None

    def _jwt_validator(self) -> tuple[JwksSource, BrokerJwtOptions]:
        """OAuthBearerValidatorCallbackHandler.configure with its default JWT validator: the
        BrokerJwtValidator's settings checked in Kafka's order, then its key set's URL."""
        def key(name: str) -> str:
            return self.config.key(name, OAUTHBEARER)

        def get(name: str):
            return self.config.get(name, OAUTHBEARER)

        validator_key = key("sasl.oauthbearer.jwt.validator.class")
        if get("sasl.oauthbearer.jwt.validator.class") not in JWT_VALIDATORS:
            raise ConfigError(validator_key, f"{validator_key}: only Kafka's {JWT_VALIDATORS[0]} is supported")
        # Imported only for a listener that validates JWTs: PyJWT and cryptography cost a single
        # broker's startup tens of milliseconds (bench/run.py's startup cases).
        from ..security.jwks import JwksEndpoint, JwksFile, fetcher, https_context, validate_url
        from ..security.jwt_validator import BrokerJwtOptions
        url_key = key("sasl.oauthbearer.jwks.endpoint.url")
        url = (get("sasl.oauthbearer.jwks.endpoint.url") or "").strip()
        if not url:
            raise ConfigError(url_key, "The OAuth validator for the broker requires \"sasl.oauthbearer.jwks.endpoint.url\" "
                                       "to be configured so that JWT signatures can be verified, but it was not set. "
                                       "Set \"sasl.oauthbearer.jwks.endpoint.url\" to the OAuth/OIDC provider's JWKS "
                                       "endpoint URL for this listener, or configure a signature-verifying "
                                       "\"sasl.oauthbearer.jwt.validator.class\".")
        audiences = frozenset(a.strip() for a in get("sasl.oauthbearer.expected.audience") or () if a.strip())
        if not audiences and not get("sasl.oauthbearer.allow.unverified.audience"):
            raise ConfigError(key("sasl.oauthbearer.expected.audience"),
                              "The OAuth validator for the broker requires \"sasl.oauthbearer.expected.audience\" to be "
                              "configured so that the token's audience (\"aud\") claim can be verified, but it was not "
                              "set. Set \"sasl.oauthbearer.expected.audience\" to the audience(s) that identify this "
                              "cluster, or set \"sasl.oauthbearer.allow.unverified.audience\" to true to accept tokens "
                              "regardless of their audience.")
        issuer = (get("sasl.oauthbearer.expected.issuer") or "").strip() or None
        if issuer is None and not get("sasl.oauthbearer.allow.unverified.issuer"):
            raise ConfigError(key("sasl.oauthbearer.expected.issuer"),
                              "The OAuth validator for the broker requires \"sasl.oauthbearer.expected.issuer\" to be "
                              "configured so that the token's issuer (\"iss\") claim can be verified, but it was not "
                              "set. Set \"sasl.oauthbearer.expected.issuer\" to the issuer URL of the OAuth/OIDC "
                              "provider that signs the tokens, or set \"sasl.oauthbearer.allow.unverified.issuer\" to "
                              "true to accept tokens regardless of their issuer.")
        claim_names = {}
        for name in ("sasl.oauthbearer.scope.claim.name", "sasl.oauthbearer.sub.claim.name"):
            value = (get(name) or "").strip()
            if not value:
                raise ConfigError(key(name), f"The OAuth configuration option {name} value is required")
            claim_names[name] = value
        for name, refused in (("audience", not audiences), ("issuer", issuer is None)):
            if refused:
                log.warning("The OAuth broker validator of listener %s does not verify the token's %s "
                            "(sasl.oauthbearer.allow.unverified.%s is true)", self.config.listener, name, name)
        options = BrokerJwtOptions(expected_audiences=audiences, expected_issuer=issuer,
                                   clock_skew_seconds=get("sasl.oauthbearer.clock.skew.seconds"),
                                   scope_claim=claim_names["sasl.oauthbearer.scope.claim.name"],
                                   sub_claim=claim_names["sasl.oauthbearer.sub.claim.name"])
        try:
            allowed = system_property(ALLOWED_SASL_OAUTHBEARER_URLS, "")
        except ValueError as error:
            raise ConfigError(None, f"KAFKA_OPTS: {error}") from None
        parsed = validate_url(url_key, url, allowed)
        refresh = (get("sasl.oauthbearer.jwks.endpoint.refresh.ms"), get("sasl.oauthbearer.jwks.endpoint.retry.backoff.ms"),
                   get("sasl.oauthbearer.jwks.endpoint.retry.backoff.max.ms"))
        jaas_key, jaas_options = self._login_module_options()
        file = parsed.scheme.lower() == "file"
        # Kafka shares a resolver between listeners whose configs and login module options are alike.
        source_key = (url,) if file else (url, *refresh, tuple(sorted(jaas_options.items())))
        source = self._jwks_sources.get(source_key)
        if source is None and file:
            source = JwksFile(url_key, parsed)
        elif source is None:
            context = https_context(jaas_key, jaas_options) if parsed.scheme.lower() == "https" else None
            source = JwksEndpoint(url_key, parsed, *refresh, fetch=fetcher(context))
        self._jwks_sources[source_key] = source
        return source, options

    def _new_sasl_server(self, mechanism: str) -> SaslServer:
        if mechanism == PLAIN:
            return PlainServer(self.plain_users)
        if mechanism == OAUTHBEARER:
            assert self.oauthbearer is not None
            return OAuthBearerServer(self.oauthbearer, wall_clock_ms)
        scram = ScramMechanism.from_name(mechanism)
        assert scram is not None
        return ScramServer(scram, self._scram_credential, self._token_login, wall_clock_ms)

    def _reauth_ms(self, mechanism: str) -> int:
        return self.config.get("connections.max.reauth.ms", mechanism)

    async def start(self, conn: Connection) -> None:
        """Secure a new connection: the TLS handshake, then its authenticator (ConnectionClosed if
        the client is too slow or its certificate maps to no principal)."""
        started = loop_time()
        if self.ssl_context is not None:
            with trio.move_on_at(started + self.authentication_timeout) as handshake:
                await conn.start_tls(self.ssl_context)
            if handshake.cancelled_caught:
                raise ConnectionClosed("TLS handshake timed out")
        if self.sasl:
            conn.authenticator = SaslServerAuthenticator(
                self.mechanisms, self._new_sasl_server, self._reauth_ms, self.max_receive_size,
                self.authentication_timeout, started, _api_versions_supported)
        else:
            conn.authenticator = Authenticator(self._certificate_principal(conn))

    def _certificate_principal(self, conn: Connection) -> KafkaPrincipal:
        certificate = conn.peer_certificate()
        if certificate is None:
            return ANONYMOUS
        try:
            return KafkaPrincipal(USER_TYPE, self.principal_mapper.name(distinguished_name(certificate)))
        except NoMatchingRule as error:
            raise ConnectionClosed(f"Failed to map the client certificate to a principal: {error}") from None


def _api_versions_supported(version: int) -> bool:
    handler = HANDLERS[ApiKey.API_VERSIONS]
    return handler.min_version <= version <= handler.max_version


def listener_securities(config, scram_credential: ScramCredentials,
                        token_login: TokenLogin | None = None) -> dict[str, ListenerSecurity]:
    """A ListenerSecurity for every listener of the config, by listener name."""
    jwks_sources: JwksSources = {}
    return {endpoint.name: ListenerSecurity(config, endpoint.name, endpoint.security_protocol, scram_credential,
                                            jwks_sources, token_login)
            for endpoint in config.listeners}


async def keep_key_sets(securities: dict[str, ListenerSecurity], *, task_status=trio.TASK_STATUS_IGNORED) -> None:
    """Keep the listeners' JWKS current (each fetched once before this task reports started: a
    broker that cannot fetch one does not start, as in Kafka)."""
    sources = list({id(s.jwks): s.jwks for s in securities.values() if s.jwks is not None}.values())
    async with trio.open_nursery() as nursery:
        for source in sources:
            await nursery.start(source.run)
        task_status.started()
