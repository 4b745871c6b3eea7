"""What each listener needs to secure its connections, built once from the config (Kafka's
ChannelBuilders): a TLS context for SSL and SASL_SSL, the SASL mechanisms and their users for
SASL_PLAINTEXT and SASL_SSL, the principal builder's mapping rules. A bad value stops the broker
with a ConfigError naming the key.
"""

from __future__ import annotations

from collections.abc import Callable

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
from ..security.oauthbearer import OAuthBearerServer, UnsecuredValidatorOptions, validate_unsecured
from ..security.plain import PlainServer
from ..context import ANONYMOUS, KafkaPrincipal
from ..security.principal import USER_TYPE, NoMatchingRule, SslPrincipalMapper, distinguished_name
from ..security.sasl import OAUTHBEARER, PLAIN, SUPPORTED_MECHANISMS, SaslServer
from ..security.scram import ScramCredential, ScramServer, TokenLogin
from .tls import server_context

# Kafka has no server-side limit on how long a client may take to authenticate (only
# connections.max.idle.ms); Samsa bounds the TLS handshake and the SASL exchange together so that
# an unauthenticated client cannot hold a connection slot for long.
AUTHENTICATION_TIMEOUT_S = 30.0
DEFAULT_PRINCIPAL_BUILDER = "org.apache.kafka.common.security.authenticator.DefaultKafkaPrincipalBuilder"
# Kafka's default server callback for OAUTHBEARER, the one Samsa has.
UNSECURED_VALIDATOR = ("org.apache.kafka.common.security.oauthbearer.internals.unsecured."
                       "OAuthBearerUnsecuredValidatorCallbackHandler")

ScramCredentials = Callable[[str, ScramMechanism], "ScramCredential | None"]


class ListenerSecurity:
    def __init__(self, config, listener: str, security_protocol: str, scram_credential: ScramCredentials,
                 token_login: TokenLogin | None = None) -> None:
        self.config = ListenerConfig(config, listener)
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
        self.oauthbearer = self._oauthbearer_options() if OAUTHBEARER in self.mechanisms else None
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

    def _oauthbearer_options(self) -> UnsecuredValidatorOptions:
        # The unsecured validator's options are those of the listener's OAuthBearerLoginModule
        # (listener.name.<l>.oauthbearer.sasl.jaas.config, or sasl.jaas.config); none: its defaults.
        handler_key = self.config.key("sasl.server.callback.handler.class", OAUTHBEARER)
        handler = self.config.config.get(handler_key)
        if handler not in (None, UNSECURED_VALIDATOR):
            raise ConfigError(handler_key, f"{handler_key}: only {UNSECURED_VALIDATOR} is supported for OAUTHBEARER "
                                           "(JWT validation against a JWKS is not implemented)")
        key = self.config.key("sasl.jaas.config", OAUTHBEARER)
        text = self.config.config.get(key)
        try:
            options = {name: value for module in parse_jaas_config(str(text)) for name, value in module.options.items()
                       } if text is not None else {}
            return UnsecuredValidatorOptions.from_jaas(options)
        except (JaasConfigError, ValueError) as error:
            raise ConfigError(key, f"{key}: {error}") from None

    def _new_sasl_server(self, mechanism: str) -> SaslServer:
        if mechanism == PLAIN:
            return PlainServer(self.plain_users)
        if mechanism == OAUTHBEARER:
            options = self.oauthbearer
            assert options is not None
            return OAuthBearerServer(lambda token: validate_unsecured(token, options, wall_clock_ms()), wall_clock_ms)
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
    return {endpoint.name: ListenerSecurity(config, endpoint.name, endpoint.security_protocol, scram_credential,
                                            token_login)
            for endpoint in config.listeners}
