"""Throwaway certificates for TLS tests: a CA, a server certificate for localhost/127.0.0.1 and
client certificates, written as PEM (and PKCS12) files. EC P-256 keys: quick to make."""

from __future__ import annotations

import datetime
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.serialization import pkcs12
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

_NAME_OIDS = {"CN": NameOID.COMMON_NAME, "OU": NameOID.ORGANIZATIONAL_UNIT_NAME, "O": NameOID.ORGANIZATION_NAME,
              "L": NameOID.LOCALITY_NAME, "ST": NameOID.STATE_OR_PROVINCE_NAME, "C": NameOID.COUNTRY_NAME,
              "emailAddress": NameOID.EMAIL_ADDRESS}


def _name(attributes: list[tuple[str, str]]) -> x509.Name:
    """Attributes from the least specific (C) to the most (CN), as they are encoded."""
    return x509.Name([x509.NameAttribute(_NAME_OIDS[key], value) for key, value in attributes])


def _pem_key(key, password: str | None = None) -> bytes:
    encryption = (serialization.BestAvailableEncryption(password.encode()) if password
                  else serialization.NoEncryption())
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, encryption)


def _pem(cert: x509.Certificate) -> bytes:
    return cert.public_bytes(serialization.Encoding.PEM)


@dataclass
class Certificates:
    directory: Path
    ca: Path          # the CA certificate (trust store for both sides)
    server: Path      # server private key and certificate chain, PEM
    server_key: Path  # the server's key alone (PKCS8 PEM)
    server_chain: Path
    server_p12: Path  # the same in PKCS12, password "store-secret"
    server_encrypted: Path  # key encrypted with "key-secret", and certificate, PEM
    ca_key: ec.EllipticCurvePrivateKey
    ca_cert: x509.Certificate

    def client(self, name: str, attributes: list[tuple[str, str]], ca_signed: bool = True) -> tuple[Path, Path]:
        """A client certificate and key file (PEM), signed by the CA (or self-signed)."""
        key = ec.generate_private_key(ec.SECP256R1())
        issuer_key, issuer = (self.ca_key, self.ca_cert.subject) if ca_signed else (key, _name(attributes))
        cert = _certificate(_name(attributes), issuer, key.public_key(), issuer_key,
                            extended_usage=ExtendedKeyUsageOID.CLIENT_AUTH)
        cert_path, key_path = self.directory / f"{name}.crt", self.directory / f"{name}.key"
        cert_path.write_bytes(_pem(cert))
        key_path.write_bytes(_pem_key(key))
        return cert_path, key_path


def _certificate(subject, issuer, public_key, issuer_key, *, ca: bool = False, extended_usage=None,
                 alternative_names=None) -> x509.Certificate:
    now = datetime.datetime.now(datetime.timezone.utc)
    builder = (x509.CertificateBuilder().subject_name(subject).issuer_name(issuer).public_key(public_key)
               .serial_number(x509.random_serial_number())
               .not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(now + datetime.timedelta(days=2))
               .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True))
    if extended_usage is not None:
        builder = builder.add_extension(x509.ExtendedKeyUsage([extended_usage]), critical=False)
    if alternative_names:
        builder = builder.add_extension(x509.SubjectAlternativeName(alternative_names), critical=False)
    return builder.sign(issuer_key, hashes.SHA256())


def make_certificates(directory: Path) -> Certificates:
    import ipaddress

    directory.mkdir(parents=True, exist_ok=True)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = _name([("O", "Samsa Test"), ("CN", "Samsa Test CA")])
    ca_cert = _certificate(ca_name, ca_name, ca_key.public_key(), ca_key, ca=True)
    server_key = ec.generate_private_key(ec.SECP256R1())
    server_cert = _certificate(
        _name([("O", "Samsa Test"), ("CN", "localhost")]), ca_name, server_key.public_key(), ca_key,
        extended_usage=ExtendedKeyUsageOID.SERVER_AUTH,
        alternative_names=[x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))])
    certs = Certificates(directory, directory / "ca.crt", directory / "server.pem", directory / "server.key",
                         directory / "server-chain.crt", directory / "server.p12", directory / "server-encrypted.pem",
                         ca_key, ca_cert)
    certs.ca.write_bytes(_pem(ca_cert))
    certs.server_key.write_bytes(_pem_key(server_key))
    certs.server_chain.write_bytes(_pem(server_cert) + _pem(ca_cert))
    certs.server.write_bytes(_pem_key(server_key) + _pem(server_cert) + _pem(ca_cert))
    certs.server_p12.write_bytes(pkcs12.serialize_key_and_certificates(
        b"server", server_key, server_cert, [ca_cert], serialization.BestAvailableEncryption(b"store-secret")))
    certs.server_encrypted.write_bytes(_pem_key(server_key, "key-secret") + _pem(server_cert))
    return certs
