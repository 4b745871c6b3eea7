"""TLS contexts from Kafka's ssl.* configs (DefaultSslEngineFactory's job), for both sides of a
connection: `client_context` here, the broker's listeners' contexts in server/network/tls.py, both
from the readers below.

Key stores: PEM (`ssl.keystore.location` holding the private key and certificate chain, or the
inline `ssl.keystore.key` and `ssl.keystore.certificate.chain`; `ssl.key.password` for an encrypted
key) and PKCS12 (`ssl.keystore.password`). Trust stores: PEM (`ssl.truststore.location` or inline
`ssl.truststore.certificates`) and PKCS12; without one, the system's CAs, as Java falls back to
its cacerts. JKS is Java's own format and is refused with a message saying so.
"""

from __future__ import annotations

import os
import ssl
import tempfile
from typing import Any, Protocol


class SslConfigs(Protocol):
    """The ssl.* configs of one side: a broker's listener (server/network/listener_config.py) or a
    client's properties."""

    def key(self, name: str) -> str:
        """The config key that supplies `name` (a listener's own `listener.name.<l>.<name>`, else
        `name`), for messages."""

    def get(self, name: str) -> Any:
        """`name`'s value, typed and defaulted as Kafka's config definition says (None: unset)."""


class SslConfigError(ValueError):
    """A config that cannot be used; `key` names it."""

    def __init__(self, key: str, message: str) -> None:
        super().__init__(message)
        self.key = key


_PROTOCOLS = {
    "TLSv1": ssl.TLSVersion.TLSv1, "TLSv1.1": ssl.TLSVersion.TLSv1_1,
    "TLSv1.2": ssl.TLSVersion.TLSv1_2, "TLSv1.3": ssl.TLSVersion.TLSv1_3,
}
_KEX = {"ECDHE_ECDSA": "ECDHE-ECDSA-", "ECDHE_RSA": "ECDHE-RSA-", "DHE_RSA": "DHE-RSA-", "DHE_DSS": "DHE-DSS-",
        "RSA": ""}

def client_context(configs: SslConfigs) -> ssl.SSLContext:
    """A client's TLS context: the trust store verifies the broker, a key store (when one is set)
    is the client's certificate for mutual TLS, and ssl.endpoint.identification.algorithm=https
    (Kafka's default) checks the host name."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    set_protocols(context, configs)
    set_ciphers(context, configs)
    load_trust_store(context, configs, ssl.Purpose.SERVER_AUTH)
    if any(configs.get(name) is not None for name in
           ("ssl.keystore.location", "ssl.keystore.key", "ssl.keystore.certificate.chain")):
        load_key_store(context, configs)
    context.check_hostname = bool(configs.get("ssl.endpoint.identification.algorithm"))
    return context


def set_protocols(context: ssl.SSLContext, configs: SslConfigs) -> None:
    key = configs.key("ssl.enabled.protocols")
    enabled = configs.get("ssl.enabled.protocols")
    unknown = [name for name in enabled if name not in _PROTOCOLS]
    if unknown or not enabled:
        raise SslConfigError(key, f"Invalid value {','.join(enabled)} for configuration {key}: "
                                  f"supported protocols are {', '.join(_PROTOCOLS)}")
    versions = sorted(_PROTOCOLS[name] for name in enabled)
    try:
        context.minimum_version, context.maximum_version = versions[0], versions[-1]
    except ValueError as error:
        raise SslConfigError(key, f"{key}: {error}") from None


def _openssl_cipher_name(name: str) -> str:
    """A Java (IANA) cipher suite name in OpenSSL's spelling, e.g. TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256
    is ECDHE-RSA-AES128-GCM-SHA256; other names are taken to be OpenSSL's already."""
    if not name.startswith("TLS_") or "_WITH_" not in name:
        return name
    kex, cipher = name[4:].split("_WITH_", 1)
    if kex not in _KEX:
        return name
    parts = cipher.split("_")
    if parts[0] == "AES" and len(parts) == 4:
        bits, mode, digest = parts[1:]
        cipher = f"AES{bits}-{digest}" if mode == "CBC" else f"AES{bits}-{mode}-{digest}"
    elif parts[:2] == ["CHACHA20", "POLY1305"]:
        cipher = "CHACHA20-POLY1305"
    else:
        cipher = "-".join(parts)
    return _KEX[kex] + cipher


def set_ciphers(context: ssl.SSLContext, configs: SslConfigs) -> None:
    key = configs.key("ssl.cipher.suites")
    suites = [name for name in configs.get("ssl.cipher.suites") if name]
    # TLS 1.3 suites (TLS_AES_128_GCM_SHA256, ...) cannot be narrowed through Python's ssl module.
    tls12 = [_openssl_cipher_name(name) for name in suites if "_WITH_" in name or not name.startswith("TLS_")]
    if not tls12:
        return
    try:
        context.set_ciphers(":".join(tls12))
    except ssl.SSLError:
        raise SslConfigError(key, f"None of the cipher suites in {key} ({','.join(suites)}) is available") from None


def _password(configs: SslConfigs, name: str) -> str | None:
    value = configs.get(name)
    return None if value is None else str(value)


def load_key_store(context: ssl.SSLContext, configs: SslConfigs) -> None:
    type_key = configs.key("ssl.keystore.type")
    store_type = str(configs.get("ssl.keystore.type")).upper()
    location = configs.get("ssl.keystore.location")
    inline_key = _password(configs, "ssl.keystore.key")
    inline_chain = _password(configs, "ssl.keystore.certificate.chain")
    if inline_key is not None or inline_chain is not None:
        if store_type != "PEM":
            raise SslConfigError(type_key, "ssl.keystore.key and ssl.keystore.certificate.chain need ssl.keystore.type=PEM")
        if inline_key is None or inline_chain is None:
            raise SslConfigError(configs.key("ssl.keystore.key"),
                              "ssl.keystore.key and ssl.keystore.certificate.chain must be set together")
        _load_pem_chain(context, inline_chain + "\n" + inline_key, _password(configs, "ssl.key.password"),
                        configs.key("ssl.keystore.key"))
        return
    location_key = configs.key("ssl.keystore.location")
    if location is None:
        raise SslConfigError(location_key, f"A TLS listener needs a key store: set {location_key} "
                                        "(or ssl.keystore.key and ssl.keystore.certificate.chain)")
    if store_type == "PEM":
        _load_cert_chain(context, location, _password(configs, "ssl.key.password"), location_key)
    elif store_type == "PKCS12":
        key, chain = _pkcs12(_read(location, location_key), _password(configs, "ssl.keystore.password"), location_key)
        if key is None or not chain:
            raise SslConfigError(location_key, f"{location} holds no private key with its certificate")
        _load_pem_chain(context, chain + key, None, location_key)
    else:
        raise SslConfigError(type_key, f"ssl.keystore.type {store_type} is not supported (PEM or PKCS12)")


def load_trust_store(context: ssl.SSLContext, configs: SslConfigs,
                      purpose: ssl.Purpose = ssl.Purpose.CLIENT_AUTH) -> None:
    type_key = configs.key("ssl.truststore.type")
    store_type = str(configs.get("ssl.truststore.type")).upper()
    inline = _password(configs, "ssl.truststore.certificates")
    location = configs.get("ssl.truststore.location")
    location_key = configs.key("ssl.truststore.location")
    try:
        if inline is not None:
            if store_type != "PEM":
                raise SslConfigError(type_key, "ssl.truststore.certificates needs ssl.truststore.type=PEM")
            context.load_verify_locations(cadata=inline)
        elif location is None:
            context.load_default_certs(purpose)
        elif store_type == "PEM":
            context.load_verify_locations(cadata=_read(location, location_key).decode("latin-1"))
        elif store_type == "PKCS12":
            _, certificates = _pkcs12(_read(location, location_key), _password(configs, "ssl.truststore.password"),
                                      location_key)
            context.load_verify_locations(cadata=certificates)
        else:
            raise SslConfigError(type_key, f"ssl.truststore.type {store_type} is not supported (PEM or PKCS12)")
    except ssl.SSLError as error:
        raise SslConfigError(location_key, f"Cannot load the trust store: {error}") from None


def _read(path: str, key: str) -> bytes:
    try:
        with open(path, "rb") as file:
            return file.read()
    except OSError as error:
        raise SslConfigError(key, f"Cannot read {path} ({key}): {error.strerror}") from None


def _pkcs12(data: bytes, password: str | None, key: str) -> tuple[str | None, str]:
    """The private key (PEM, unencrypted) and every certificate (PEM) of a PKCS12 store."""
    try:
        from cryptography.hazmat.primitives import serialization
        from cryptography.hazmat.primitives.serialization import pkcs12
    except ImportError:
        raise SslConfigError(key, "PKCS12 stores need the `cryptography` package") from None
    try:
        private_key, certificate, extra = pkcs12.load_key_and_certificates(
            data, None if password is None else password.encode())
    except ValueError as error:
        raise SslConfigError(key, f"Cannot open the PKCS12 store: {error}") from None
    chain = "".join(c.public_bytes(serialization.Encoding.PEM).decode()
                    for c in ([certificate] if certificate else []) + list(extra))
    pem_key = None if private_key is None else private_key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()).decode()
    return pem_key, chain


def _load_pem_chain(context: ssl.SSLContext, pem: str, password: str | None, key: str) -> None:
    # ssl can only load a certificate chain from a file: a private one, removed at once.
    descriptor, path = tempfile.mkstemp(suffix=".pem")
    try:
        with os.fdopen(descriptor, "w") as file:
            file.write(pem)
        _load_cert_chain(context, path, password, key)
    finally:
        os.unlink(path)


def _load_cert_chain(context: ssl.SSLContext, path: str, password: str | None, key: str) -> None:
    try:
        # Without a password OpenSSL would prompt on the terminal for an encrypted key: give it "".
        context.load_cert_chain(path, password=password or "")
    except (ssl.SSLError, OSError) as error:
        raise SslConfigError(key, f"Cannot load the private key and certificate chain from {key}: {error}") from None
