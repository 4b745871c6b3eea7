"""DescribeUserScramCredentials and AlterUserScramCredentials over loopback, with the checks and
messages of Kafka's ScramControlManager and ScramImage; credentials survive a restart."""

from __future__ import annotations

from samsa.server.security.scram import ScramMechanism
from samsa.wire.errors import ErrorCode
from samsa.wire.protocol import ApiKey, request_class

from security_helpers import config, run
from loopback import Client

Alter = request_class(ApiKey.ALTER_USER_SCRAM_CREDENTIALS)
Describe = request_class(ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS)
SHA256, SHA512 = ScramMechanism.SCRAM_SHA_256.type_id, ScramMechanism.SCRAM_SHA_512.type_id


def upsert(name, mechanism=SHA256, iterations=4096, salt=b"salt", salted=b"s" * 32):
    return Alter.ScramCredentialUpsertion(name=name, mechanism=mechanism, iterations=iterations, salt=salt,
                                          salted_password=salted)


def delete(name, mechanism=SHA256):
    return Alter.ScramCredentialDeletion(name=name, mechanism=mechanism)


async def alter(client, upsertions=(), deletions=()):
    response = await client.call(Alter(deletions=list(deletions), upsertions=list(upsertions)), 0)
    return {r.user: (r.error_code, r.error_message) for r in response.results}


async def describe(client, users=None):
    request = Describe(users=None if users is None else [Describe.UserName(name=u) for u in users])
    response = await client.call(request, 0)
    assert response.error_code == ErrorCode.NONE
    return {r.user: (r.error_code, r.error_message, sorted((c.mechanism, c.iterations) for c in r.credential_infos))
            for r in response.results}


def test_alter_and_describe(tmp_path):
    ok = (ErrorCode.NONE, None)

    async def scenario(broker, ports):
        client = await Client.connect(ports["PLAINTEXT"])
        assert await describe(client) == {}
        assert await alter(client, [upsert("alice"), upsert("bob", SHA512, 8192)]) == {"alice": ok, "bob": ok}
        assert await alter(client, [upsert("alice", SHA512, 16384)]) == {"alice": ok}
        assert await describe(client) == {"alice": (0, None, [(SHA256, 4096), (SHA512, 16384)]),
                                          "bob": (0, None, [(SHA512, 8192)])}
        assert await describe(client, ["bob", "carol", "alice", "alice"]) == {
            "bob": (0, None, [(SHA512, 8192)]),
            "carol": (ErrorCode.RESOURCE_NOT_FOUND, "Attempt to describe a user credential that does not exist: carol", []),
            "alice": (ErrorCode.DUPLICATE_RESOURCE,
                      "Cannot describe SCRAM credentials for the same user twice in a single request: alice", []),
        }
        assert await alter(client, deletions=[delete("bob", SHA512)]) == {"bob": ok}
        assert await describe(client, []) == {"alice": (0, None, [(SHA256, 4096), (SHA512, 16384)])}

    run(config(tmp_path, "PLAINTEXT://127.0.0.1:0"), scenario)


def test_alter_errors(tmp_path):
    async def scenario(broker, ports):
        client = await Client.connect(ports["PLAINTEXT"])
        await alter(client, [upsert("dora")])
        assert await alter(client, [upsert("few", iterations=4095), upsert("many", iterations=16385),
                                    upsert("", SHA256), upsert("odd", mechanism=0), upsert("nosalt", salt=b""),
                                    upsert("twice"), upsert("twice", SHA512), upsert("good")],
                           [delete("ghost"), delete("dora", SHA512), delete("unknown", mechanism=3)]) == {
            "few": (ErrorCode.UNACCEPTABLE_CREDENTIAL, "Too few iterations"),
            "many": (ErrorCode.UNACCEPTABLE_CREDENTIAL, "Too many iterations"),
            "": (ErrorCode.UNACCEPTABLE_CREDENTIAL, "Username must not be empty"),
            "odd": (ErrorCode.UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism"),
            "nosalt": (ErrorCode.UNACCEPTABLE_CREDENTIAL, "Salt and salted password must not be empty"),
            "twice": (ErrorCode.DUPLICATE_RESOURCE, "A user credential cannot be altered twice in the same request"),
            "good": (ErrorCode.NONE, None),
            "ghost": (ErrorCode.RESOURCE_NOT_FOUND, "Attempt to delete a user credential that does not exist"),
            "dora": (ErrorCode.RESOURCE_NOT_FOUND, "Attempt to delete a user credential that does not exist"),
            "unknown": (ErrorCode.UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism"),
        }
        assert set(await describe(client)) == {"dora", "good"}

    run(config(tmp_path, "PLAINTEXT://127.0.0.1:0"), scenario)


def test_credentials_survive_a_restart(tmp_path):
    async def create(broker, ports):
        client = await Client.connect(ports["PLAINTEXT"])
        await alter(client, [upsert("alice", SHA512, 5000)])

    async def check(broker, ports):
        client = await Client.connect(ports["PLAINTEXT"])
        assert await describe(client) == {"alice": (0, None, [(SHA512, 5000)])}

    run(config(tmp_path, "PLAINTEXT://127.0.0.1:0"), create)
    run(config(tmp_path, "PLAINTEXT://127.0.0.1:0"), check)
