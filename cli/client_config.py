"""`--command-config FILE`: a Kafka client properties file, as Kafka's own tools read it (and the
console tools' --consumer-property/--producer-property over it).

security.protocol PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL; the ssl.* configs as the broker's
listeners read them (client/tls.py: key and trust stores in PEM or PKCS12, inline PEM, protocols,
cipher suites) plus ssl.endpoint.identification.algorithm; sasl.mechanism PLAIN,
SCRAM-SHA-256 or SCRAM-SHA-512 with the user in sasl.jaas.config's `username="..."
password="..."`. A store's type defaults to PKCS12 for a .p12/.pfx file and to PEM otherwise (not
Java's JKS, which Python cannot read).
"""

from __future__ import annotations

from collections.abc import Mapping

from ..client.jaas import JaasConfigError, parse_jaas_config
from ..client.sasl import MECHANISMS, SaslLogin
from ..client.tls import SslConfigError, client_context
from ..server.config.kafka_config import ConfigError, broker_definition, parse_config, parse_properties
from . import BAD_USAGE, CommandError

SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
_STORE_TYPES = {"ssl.keystore.type": "ssl.keystore.location", "ssl.truststore.type": "ssl.truststore.location"}


def load_properties(path: str | None, what: str = "properties") -> dict[str, str]:
    """A properties file, as java.util.Properties reads it (none: {}); CommandError (exit 2) when
    it cannot be read or is malformed (`invalid {what} in {path}: ...`)."""
    if path is None:
        return {}
    try:
        with open(path, encoding="latin-1") as file:  # java.util.Properties.load(InputStream)
            return parse_properties(file.read())
    except OSError as e:
        raise CommandError(f"cannot read {path}: {e.strerror}", BAD_USAGE) from None
    except ConfigError as e:
        raise CommandError(f"invalid {what} in {path}: {e}", BAD_USAGE) from None


class ClientConfig:
    """Client properties; `get(name)` answers the ssl.* configs typed and defaulted by the broker's
    config definitions (Kafka's SslConfigs are one set for both sides), for client/tls.py."""

    def __init__(self, props: Mapping[str, str] | None = None) -> None:
        self.props = dict(props or {})
        timeout = self.props.get("request.timeout.ms", "30000")
        try:
            self.request_timeout_ms = int(timeout)
        except ValueError:
            raise ConfigError("request.timeout.ms", f"request.timeout.ms {timeout!r} is not a number") from None
        self.security_protocol = self.props.get("security.protocol", "PLAINTEXT").strip().upper()
        if self.security_protocol not in SECURITY_PROTOCOLS:
            raise ConfigError("security.protocol", f"security.protocol {self.props['security.protocol']!r} "
                                                   f"is not one of {', '.join(SECURITY_PROTOCOLS)}")
        self.sasl = self._sasl_login() if self.security_protocol.startswith("SASL_") else None
        self.ssl_context = client_context(self) if self.security_protocol.endswith("SSL") else None

    @classmethod
    def load(cls, path: str | None, overrides: Mapping[str, str] | None = None) -> ClientConfig:
        """The properties of `path` (no file: none, PLAINTEXT), `overrides` over them (Kafka's
        precedence); CommandError (exit 2) for a file that cannot be read or a config that cannot
        be used, naming the key (and the file, when the config is the file's alone)."""
        props = load_properties(path, "client config") | dict(overrides or {})
        try:
            return cls(props)
        except (ConfigError, SslConfigError) as e:
            where = f" in {path}" if path is not None and not overrides else ""
            raise CommandError(f"invalid client config{where}: {e}", BAD_USAGE) from None

    def key(self, name: str) -> str:
        """The key that supplies `name`: itself (a client has no listener prefixes)."""
        return name

    def get(self, name: str):
        """A config's typed value, its default when unset; KeyError for a name neither set nor known."""
        if name in _STORE_TYPES and name not in self.props:
            location = self.props.get(_STORE_TYPES[name], "").lower()
            return "PKCS12" if location.endswith((".p12", ".pfx")) else "PEM"
        definition = broker_definition(name)
        if name in self.props:
            raw = self.props[name]
            return raw if definition is None else parse_config(name, definition, raw)
        if definition is None or name.startswith("listener.name."):  # no listener overrides on a client
            raise KeyError(name)
        return definition.default

    def _sasl_login(self) -> SaslLogin:
        mechanism = self.props.get("sasl.mechanism", "GSSAPI").strip().upper()
        if mechanism not in MECHANISMS:
            raise ConfigError("sasl.mechanism", f"sasl.mechanism {mechanism} is not supported here "
                                                f"({', '.join(MECHANISMS)})")
        if "sasl.jaas.config" not in self.props:
            raise ConfigError("sasl.jaas.config", f"{self.security_protocol} needs sasl.jaas.config with the "
                                                  "username and password")
        try:
            modules = parse_jaas_config(self.props["sasl.jaas.config"])
        except JaasConfigError as e:
            raise ConfigError("sasl.jaas.config", f"sasl.jaas.config: {e}") from None
        options = modules[0].options
        if "username" not in options or "password" not in options:
            raise ConfigError("sasl.jaas.config", "sasl.jaas.config needs username=\"...\" and password=\"...\"")
        return SaslLogin(mechanism, options["username"], options["password"])

