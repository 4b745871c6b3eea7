"""TLS server contexts of the broker's listeners, from Kafka's ssl.* configs as client/tls.py reads
them (key and trust stores, protocols, cipher suites), and whom a listener asks for a certificate.
"""

from __future__ import annotations

import ssl

from ...client.tls import SslConfigError, load_key_store, load_trust_store, set_ciphers, set_protocols
from ..config.kafka_config import ConfigError
from .listener_config import ListenerConfig

_CLIENT_AUTH = {"none": ssl.CERT_NONE, "requested": ssl.CERT_OPTIONAL, "required": ssl.CERT_REQUIRED}


def server_context(listener: ListenerConfig, security_protocol: str) -> ssl.SSLContext:
    """The TLS context of an SSL or SASL_SSL listener; ConfigError names the key at fault."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    try:
        set_protocols(context, listener)
        set_ciphers(context, listener)
        load_key_store(context, listener)
        load_trust_store(context, listener)
    except SslConfigError as e:
        raise ConfigError(e.key, str(e)) from None
    context.verify_mode = _CLIENT_AUTH[client_auth(listener, security_protocol)]
    return context


def client_auth(listener: ListenerConfig, security_protocol: str) -> str:
    """ssl.client.auth for this listener. As in Kafka, a SASL_SSL listener asks for client
    certificates only when the listener-prefixed config says so."""
    key = listener.key("ssl.client.auth")
    if security_protocol == "SASL_SSL" and key == "ssl.client.auth":
        return "none"
    return listener.config.get(key)
