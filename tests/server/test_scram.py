"""The SCRAM server against RFC 7677's SCRAM-SHA-256 example and its own failure cases."""

from __future__ import annotations

import base64

import pytest

from samsa.client.scram import ScramClient, ScramMechanism
from samsa.server.security.sasl import SaslAuthenticationException, SaslException
from samsa.server.security.scram import ScramCredential, ScramServer, username

SHA256 = ScramMechanism.SCRAM_SHA_256


def test_rfc7677_example_credential():
    # RFC 7677 section 3: user "user", password "pencil", 4096 iterations; the client's proof and
    # the server's signature for that exchange follow from StoredKey and ServerKey.
    salt = base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ==")
    credential = ScramCredential.from_password(SHA256, "pencil", 4096, salt)
    auth_message = (b"n=user,r=rOprNGfwEbeRWgbNEkqO,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
                    b"s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096,c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0")
    assert base64.b64encode(SHA256.hmac(credential.server_key, auth_message)) == b"6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="
    client_signature = SHA256.hmac(credential.stored_key, auth_message)
    proof = base64.b64decode("dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=")
    assert SHA256.hash(bytes(a ^ b for a, b in zip(proof, client_signature))) == credential.stored_key


def server(users: dict[str, str], mechanism=SHA256, iterations=4096) -> ScramServer:
    credentials = {u: ScramCredential.from_password(mechanism, p, iterations) for u, p in users.items()}
    return ScramServer(mechanism, lambda user, m: credentials.get(user) if m is mechanism else None)


@pytest.mark.parametrize("mechanism", list(ScramMechanism))
def test_exchange_with_escaped_user_names(mechanism):
    name = "a,b=c"
    scram = server({name: "secret"}, mechanism)
    client = ScramClient(mechanism, name, "secret")
    client.verify(scram.evaluate(client.final(scram.evaluate(client.first()))))
    assert (scram.complete, scram.authorization_id) == (True, name)


@pytest.mark.parametrize("tamper, error", [
    (lambda final: final.replace(b"c=biws", b"c=eSws"), "channel binding"),
    (lambda final: final.replace(b",p=", b"x,p=", 1), "nonce"),
    (lambda final: final[:final.index(b",p=") + 3] + base64.b64encode(b"\0" * 32), "Invalid client credentials"),
    (lambda final: b"garbage", "client final message format"),
])
def test_bad_client_final_messages(tamper, error):
    scram = server({"u": "p"})
    client = ScramClient(SHA256, "u", "p")
    final = client.final(scram.evaluate(client.first()))
    with pytest.raises(SaslException, match=error):
        scram.evaluate(tamper(final))
    assert not scram.complete


@pytest.mark.parametrize("first, exception, error", [
    (b"n,,n=nobody,r=abc", SaslException, "Invalid user credentials"),
    (b"y,,n=u,r=abc", SaslException, "client first message format"),
    (b"n,a=other,n=u,r=abc", SaslAuthenticationException, "authorization id that is different"),
    (b"n,,n=u=x,r=abc", SaslException, "client first message format"),  # a bare "=" in a name
    (b"n,,n=u,r=abc,tokenauth=true", SaslException, "Token Authentication failed: Invalid tokenId : u"),
])
def test_bad_client_first_messages(first, exception, error):
    with pytest.raises(exception, match=error):
        server({"u": "p"}).evaluate(first)


def test_credentials_below_the_minimum_iterations_are_refused():
    with pytest.raises(SaslException, match="less than the minimum 4096"):
        server({"u": "p"}, iterations=1000).evaluate(b"n,,n=u,r=abc")


def test_username_escapes():
    assert username("a=2Cb=3Dc") == "a,b=c"
