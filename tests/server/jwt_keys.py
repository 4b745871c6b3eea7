"""Signing keys made by the tests (cryptography), their JWKS, and JWTs signed with them (PyJWT): for
tests/server/test_jwt_validator.py and the JWKS listener tests."""

from __future__ import annotations

import json

import jwt
from cryptography.hazmat.primitives.asymmetric import ec, rsa


class SigningKey:
    def __init__(self, kid: str, kind: str = "RSA") -> None:
        self.kid = kid
        self.private = (rsa.generate_private_key(public_exponent=65537, key_size=2048) if kind == "RSA"
                        else ec.generate_private_key(ec.SECP256R1()))
        self.alg = "RS256" if kind == "RSA" else "ES256"

    def jwk(self, **params) -> dict:
        algorithm = jwt.algorithms.RSAAlgorithm if self.alg == "RS256" else jwt.algorithms.ECAlgorithm
        public = json.loads(algorithm.to_jwk(self.private.public_key()))
        return {k: v for k, v in {**public, "kid": self.kid, "use": "sig", **params}.items() if v is not None}

    def sign(self, claims: dict, **header) -> str:
        headers = {k: v for k, v in {"kid": self.kid, **header}.items() if v is not None}
        return jwt.encode(claims, self.private, algorithm=header.pop("alg", self.alg), headers=headers)


def jwks(*keys: SigningKey) -> str:
    return json.dumps({"keys": [k.jwk() for k in keys]})


def claims(now_s: float, **overrides) -> dict:
    """A valid token's claims at now_s: issued now, for five minutes, by `issuer` for `kafka`."""
    values = {"sub": "alice", "iss": "https://issuer.example", "aud": "kafka", "iat": int(now_s),
              "exp": int(now_s) + 300, "scope": "produce consume"}
    values.update(overrides)
    return {k: v for k, v in values.items() if v is not None}
