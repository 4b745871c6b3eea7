"""Delegation tokens (KIP-48, KIP-373) on Samsa and on Kafka 4.4, side by side.

Each broker has a PLAINTEXT listener (where the SCRAM users alice and bob are made) and a
SASL_PLAINTEXT one offering SCRAM, `delegation.token.secret.key` set and an authorizer that allows
what no ACL denies. Kafka's `kafka-delegation-tokens.sh` creates, describes, renews and expires
tokens as alice; the Java client then logs in with a token (its id as user name, its HMAC as
password, tokenauth=true), produces and consumes, and after the token is expired its login fails.
The transcripts must be equal once token ids, HMACs and dates are masked. The protocol's own
answers (errors with tokens enabled, and disabled on a SASL listener) are compared field by field
as test_differential.py does.
"""

from __future__ import annotations

import base64
import re
import secrets
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from compat_util import wait_for
from conftest import BrokerPool, free_port
from server_process import HOST, BrokerStartError
from test_differential import assert_same
from test_kafka_tools import Tools, kinds, log4j2, normalize  # noqa: F401 - fixtures used below
from wire_client import WireClient

from samsa.client.scram import ScramClient, ScramMechanism
from samsa.wire.errors import ErrorCode
from samsa.wire.protocol import ApiKey, request_class

SECRET = "delegation-token-secret"
# carol runs the tool's scenario: her tokens are hers alone, whatever the other cases made.
USERS = {"alice": "alice-secret", "bob": "bob-secret", "carol": "carol-secret"}
SHA512 = ScramMechanism.SCRAM_SHA_512
AUTHORIZER = {"authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
              "allow.everyone.if.no.acl.found": "true"}

AlterUserScramCredentials = request_class(ApiKey.ALTER_USER_SCRAM_CREDENTIALS)
SaslHandshake = request_class(ApiKey.SASL_HANDSHAKE)
SaslAuthenticate = request_class(ApiKey.SASL_AUTHENTICATE)
CreateToken = request_class(ApiKey.CREATE_DELEGATION_TOKEN)
RenewToken = request_class(ApiKey.RENEW_DELEGATION_TOKEN)
ExpireToken = request_class(ApiKey.EXPIRE_DELEGATION_TOKEN)
DescribeToken = request_class(ApiKey.DESCRIBE_DELEGATION_TOKEN)
CreateAcls = request_class(ApiKey.CREATE_ACLS)


class TokenBroker:
    """A broker with a PLAINTEXT and a SASL_PLAINTEXT listener."""

    def __init__(self, broker, sasl_port: int) -> None:
        self.broker, self.sasl_port = broker, sasl_port
        self.sasl_bootstrap = f"{HOST}:{sasl_port}"


def start_with_sasl_listener(make, settings) -> TokenBroker:
    """make() a broker (not started), give it settings(plaintext port, SASL port) and start it; a
    port taken meanwhile by another process: again on new ports, as BrokerPool does."""
    for attempt in range(3):
        broker, sasl_port = make(), free_port()
        broker.overrides.update(settings(broker.port, sasl_port))
        try:
            broker.start()
        except BrokerStartError:
            if attempt == 2 or "in use" not in broker.output().lower():
                raise
            continue
        return TokenBroker(broker, sasl_port)
    raise AssertionError("unreachable")


def start_token_broker(pool: BrokerPool, secret: str | None) -> TokenBroker:
    setup = start_with_sasl_listener(lambda: pool(start=False), lambda port, sasl_port: {
        "listeners": f"PLAINTEXT://{HOST}:{port},SASL_PLAINTEXT://{HOST}:{sasl_port}",
        "sasl.enabled.mechanisms": "SCRAM-SHA-256,SCRAM-SHA-512", **AUTHORIZER,
        # Expired tokens are looked for every second (Kafka's default: every hour).
        **({"delegation.token.secret.key": secret, "delegation.token.expiry.check.interval.ms": 1000}
           if secret else {})})
    broker = setup.broker
    with WireClient(HOST, broker.port) as client:
        upsertions = []
        for user, password in USERS.items():
            salt = secrets.token_bytes(16)
            upsertions.append(AlterUserScramCredentials.ScramCredentialUpsertion(
                name=user, mechanism=SHA512.type_id, iterations=4096, salt=salt,
                salted_password=SHA512.salted_password(password, salt, 4096)))
        answer = client.call(AlterUserScramCredentials(deletions=[], upsertions=upsertions), 0)
        assert all(r.error_code == 0 for r in answer.results), answer
    # Kafka's broker learns of the credentials from the controller's log a moment later.
    wait_for(lambda: login(setup, "alice", USERS["alice"]), what="alice's SCRAM login")
    return setup


def login(setup: TokenBroker, user: str, password: str, token_auth: bool = False) -> WireClient:
    """A connection to the SASL listener logged in with SCRAM-SHA-512; AssertionError with the
    broker's error when the login fails."""
    client = WireClient(HOST, setup.sasl_port)
    try:
        assert client.call(SaslHandshake(mechanism=SHA512.mechanism_name), 1).error_code == 0
        scram = ScramClient(SHA512, user, password, token_auth)
        first = client.call(SaslAuthenticate(auth_bytes=scram.first()), 2)
        assert first.error_code == 0, first.error_message
        final = client.call(SaslAuthenticate(auth_bytes=scram.final(bytes(first.auth_bytes))), 2)
        assert final.error_code == 0, final.error_message
        scram.verify(bytes(final.auth_bytes))
    except BaseException:
        client.close()
        raise
    return client


def login_error(setup: TokenBroker, user: str, password: str) -> str:
    """The error message of a token login that fails."""
    with pytest.raises(AssertionError) as failed:
        login(setup, user, password, token_auth=True).close()
    return str(failed.value).splitlines()[0]


def start_pairs(tmp_path_factory, secret: str | None) -> tuple[dict[str, TokenBroker], list[BrokerPool]]:
    pools = [BrokerPool(tmp_path_factory, f"tokens-{kind}", kind) for kind in ("samsa", "kafka")]
    try:
        with ThreadPoolExecutor(2) as ex:
            started = list(ex.map(lambda pool: start_token_broker(pool, secret), pools))
        return dict(zip(("samsa", "kafka"), started)), pools
    except BaseException:
        for pool in pools:
            pool.close()
        raise


@pytest.fixture(scope="module")
def brokers(tmp_path_factory, kinds):  # noqa: F811 - kinds: test_kafka_tools' fixture
    started, pools = start_pairs(tmp_path_factory, SECRET)
    try:
        yield started
    finally:
        for pool in pools:
            pool.close()


# -- the protocol's answers -------------------------------------------------------------------------

MASKED = {"token_id", "hmac", "issue_timestamp_ms", "expiry_timestamp_ms", "max_timestamp_ms", "issue_timestamp",
          "expiry_timestamp", "max_timestamp"}


def masked(response):
    """A response whose token ids, HMACs and timestamps (not the 0 and -1 of errors) are masked."""
    for name in MASKED & set(response._fields):
        value = getattr(response, name)
        if value not in (0, -1, "", b""):
            setattr(response, name, f"<{name}>")
    for token in getattr(response, "tokens", None) or []:
        masked(token)
    return response


def both(brokers, call):
    """call(TokenBroker) on each broker: (Samsa's answer, Kafka's answer)."""
    return call(brokers["samsa"]), call(brokers["kafka"])


def as_user(user: str, message, version: int):
    def call(setup):
        with login(setup, user, USERS[user]) as client:
            return client.call(message, version)
    return call


def create(owner: str | None = None, renewers=(), max_lifetime_ms: int = -1):
    return CreateToken(owner_principal_type="User" if owner else "", owner_principal_name=owner or "",
                       renewers=[CreateToken.CreatableRenewers(principal_type=t, principal_name=n) for t, n in renewers],
                       max_lifetime_ms=max_lifetime_ms)


def wait_described(setup, hmac: bytes, present: bool = True, user: str = "alice") -> None:
    wait_for(lambda: described(setup, hmac, user) == present, what=f"the token {'described' if present else 'gone'}")


def described(setup, hmac: bytes, user: str = "alice") -> bool:
    """Whether the broker's token cache has the token (Kafka's broker learns of it from the log)."""
    with login(setup, user, USERS[user]) as client:
        tokens = client.call(DescribeToken(owners=None), 3).tokens
    return any(bytes(t.hmac) == hmac for t in tokens)


@pytest.mark.parametrize("version", [3, 1])
def test_create_and_describe(brokers, version):
    samsa, kafka = both(brokers, as_user("alice", create(renewers=[("User", "bob")]), version))
    assert samsa.error_code == kafka.error_code == 0
    assert len(samsa.hmac) == len(kafka.hmac) == 64
    for setup, answer in zip(brokers.values(), (samsa, kafka)):
        wait_described(setup, bytes(answer.hmac))
    descriptions = both(brokers, as_user("bob", DescribeToken(owners=[DescribeToken.DescribeDelegationTokenOwner(
        principal_type="User", principal_name="alice")]), version))
    # Each broker also has the tokens of the other cases: only this one's are compared.
    for answer, description in zip((samsa, kafka), descriptions):
        description.tokens = [t for t in description.tokens if t.token_id == answer.token_id]
    assert_same(*(masked(d) for d in descriptions))
    assert_same(masked(samsa), masked(kafka))


@pytest.mark.parametrize("case", ["other owner", "group renewer", "empty owners"])
def test_create_and_describe_cases(brokers, case):
    message, version = {
        "other owner": (create(owner="bob"), 3),  # KIP-373: allowed, no ACL denies CREATE_TOKENS on User:bob
        "group renewer": (create(renewers=[("Group", "g")]), 3),
        "empty owners": (DescribeToken(owners=[]), 3),
    }[case]
    assert_same(*(masked(a) for a in both(brokers, as_user("alice", message, version))))


def test_unknown_hmac(brokers):
    for message, version in ((RenewToken(hmac=b"unknown", renew_period_ms=-1), 2),
                             (ExpireToken(hmac=b"unknown", expiry_time_period_ms=-1), 1)):
        samsa, kafka = both(brokers, as_user("alice", message, version))
        assert samsa.error_code == ErrorCode.DELEGATION_TOKEN_NOT_FOUND
        assert_same(samsa, kafka)


def test_renew_expire_and_owner_mismatch(brokers):
    tokens = both(brokers, as_user("alice", create(), 3))
    for setup, token in zip(brokers.values(), tokens):
        wait_described(setup, bytes(token.hmac))

    def each(user, make, version):
        return tuple(as_user(user, make(bytes(token.hmac)), version)(setup)
                     for setup, token in zip(brokers.values(), tokens))
    samsa, kafka = each("bob", lambda hmac: RenewToken(hmac=hmac, renew_period_ms=-1), 2)
    assert samsa.error_code == ErrorCode.DELEGATION_TOKEN_OWNER_MISMATCH
    assert_same(samsa, kafka)
    assert_same(*each("bob", lambda hmac: ExpireToken(hmac=hmac, expiry_time_period_ms=-1), 2))
    assert_same(*(masked(a) for a in each("alice", lambda hmac: RenewToken(hmac=hmac, renew_period_ms=60000), 1)))
    assert_same(*(masked(a) for a in each("alice", lambda hmac: ExpireToken(hmac=hmac, expiry_time_period_ms=-1), 2)))


def test_a_token_authenticated_connection_may_not_manage_tokens(brokers):
    tokens = both(brokers, as_user("alice", create(), 3))
    answers = []
    for setup, token in zip(brokers.values(), tokens):
        wait_described(setup, bytes(token.hmac))
        with login(setup, token.token_id, base64.b64encode(bytes(token.hmac)).decode(), token_auth=True) as client:
            answers.append([client.call(message, version) for message, version in (
                (create(), 3), (RenewToken(hmac=bytes(token.hmac), renew_period_ms=-1), 2),
                (ExpireToken(hmac=bytes(token.hmac), expiry_time_period_ms=-1), 2), (DescribeToken(owners=None), 3))])
    for samsa, kafka in zip(*answers):
        assert samsa.error_code == ErrorCode.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED
        assert_same(samsa, kafka)


def deny(principal: str, operation, resource_type, name: str):
    from samsa.server.security.authorizer import DENY, PatternType
    return CreateAcls.AclCreation(resource_type=int(resource_type), resource_name=name,
                                  resource_pattern_type=int(PatternType.LITERAL), principal=principal, host="*",
                                  operation=int(operation), permission_type=int(DENY))


def test_acls_on_user_and_token_resources(brokers):
    """KIP-373: a token for another owner needs CREATE_TOKENS on that User resource; another
    owner's tokens are described with DESCRIBE_TOKENS on the owner or DESCRIBE on the token."""
    from samsa.server.security.authorizer import CREATE_TOKENS, DELEGATION_TOKEN, DESCRIBE, DESCRIBE_TOKENS, USER
    for setup in brokers.values():
        with WireClient(HOST, setup.broker.port) as client:
            answer = client.call(CreateAcls(creations=[
                deny("User:alice", CREATE_TOKENS, USER, "User:dave"),
                deny("User:alice", DESCRIBE_TOKENS, USER, "User:bob"),
                deny("User:alice", DESCRIBE, DELEGATION_TOKEN, "*")]), 3)
            assert all(r.error_code == 0 for r in answer.results), answer
    bobs = both(brokers, as_user("bob", create(), 3))
    for setup, token in zip(brokers.values(), bobs):
        wait_described(setup, bytes(token.hmac), user="bob")
    # Kafka's authorizer applies the ACLs when it reads them back from the metadata log.
    for_dave = as_user("alice", create(owner="dave"), 3)
    wait_for(lambda: for_dave(brokers["kafka"]).error_code == ErrorCode.DELEGATION_TOKEN_AUTHORIZATION_FAILED,
             what="Kafka's authorizer to deny alice CREATE_TOKENS on User:dave")
    samsa, kafka = both(brokers, for_dave)
    assert samsa.error_code == ErrorCode.DELEGATION_TOKEN_AUTHORIZATION_FAILED
    assert_same(samsa, kafka)
    owners = [DescribeToken.DescribeDelegationTokenOwner(principal_type="User", principal_name="bob")]
    for user, visible in (("alice", False), ("bob", True)):
        descriptions = both(brokers, as_user(user, DescribeToken(owners=owners), 3))
        assert [any(t.token_id == token.token_id for t in d.tokens) for d, token in zip(descriptions, bobs)] == [
            visible, visible], user


def test_a_token_session_ends_when_the_token_expires(brokers):
    """A connection a token authenticated lasts until the token's expiry (KIP-368's session
    lifetime, in SaslAuthenticate's answer); the next request after it closes the connection."""
    lifetimes = []
    for setup in brokers.values():  # one after the other: each token lives 4 seconds from its creation
        token = as_user("alice", create(max_lifetime_ms=4000), 3)(setup)
        wait_described(setup, bytes(token.hmac))
        client = WireClient(HOST, setup.sasl_port)
        with client:
            assert client.call(SaslHandshake(mechanism=SHA512.mechanism_name), 1).error_code == 0
            scram = ScramClient(SHA512, token.token_id, base64.b64encode(bytes(token.hmac)).decode(), True)
            first = client.call(SaslAuthenticate(auth_bytes=scram.first()), 2)
            final = client.call(SaslAuthenticate(auth_bytes=scram.final(bytes(first.auth_bytes))), 2)
            assert final.error_code == 0, final.error_message
            lifetimes.append(final.session_lifetime_ms)
            assert client.call(DescribeToken(owners=None), 3).error_code == ErrorCode.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED
            wait_for(lambda c=client: c.call_bytes(ApiKey.API_VERSIONS, 0) is None, timeout=15, interval=0.5,
                     what="the connection closed once the token expired")
    assert all(0 < lifetime <= 4000 for lifetime in lifetimes), lifetimes


def test_expired_tokens_are_removed(brokers):
    """delegation.token.expiry.check.interval.ms: a token past its expiry is removed (a renewal
    then finds none)."""
    tokens = both(brokers, as_user("alice", create(max_lifetime_ms=1000), 3))
    for setup, token in zip(brokers.values(), tokens):
        wait_for(lambda s=setup, t=token: not described(s, bytes(t.hmac)), 15, interval=0.5, what="the token removed")
    renewals = [as_user("alice", RenewToken(hmac=bytes(token.hmac), renew_period_ms=-1), 2)(setup)
                for setup, token in zip(brokers.values(), tokens)]
    assert renewals[0].error_code == ErrorCode.DELEGATION_TOKEN_NOT_FOUND
    assert_same(*renewals)


def test_tokens_survive_a_restart(tmp_path_factory, broker_kind):
    """Tokens are kept with the cluster's metadata: after a restart the token still logs in."""
    pool = BrokerPool(tmp_path_factory, f"tokens-restart-{broker_kind}", broker_kind)
    try:
        setup = start_token_broker(pool, SECRET)
        token = as_user("alice", create(), 3)(setup)
        wait_described(setup, bytes(token.hmac))
        setup.broker.restart()
        password = base64.b64encode(bytes(token.hmac)).decode()
        wait_for(lambda: login(setup, token.token_id, password, token_auth=True), 30, what="the token's login")
    finally:
        pool.close()


@pytest.fixture(scope="module")
def disabled(tmp_path_factory, kinds):  # noqa: F811
    """The same brokers without delegation.token.secret.key."""
    started, pools = start_pairs(tmp_path_factory, None)
    try:
        yield started
    finally:
        for pool in pools:
            pool.close()


@pytest.mark.parametrize("message, version", [
    (create(), 3), (create(), 1), (RenewToken(hmac=b"x", renew_period_ms=-1), 2),
    (ExpireToken(hmac=b"x", expiry_time_period_ms=-1), 1), (DescribeToken(owners=None), 3),
    (DescribeToken(owners=[]), 2),
], ids=["create-v3", "create-v1", "renew", "expire", "describe", "describe-no-owners"])
def test_tokens_disabled(disabled, message, version):
    samsa, kafka = both(disabled, as_user("alice", message, version))
    assert_same(samsa, kafka)
    if message.API_KEY != ApiKey.DESCRIBE_DELEGATION_TOKEN or message.owners is None:
        assert samsa.error_code == ErrorCode.DELEGATION_TOKEN_AUTH_DISABLED


# -- kafka-delegation-tokens.sh and the Java client -------------------------------------------------

HMAC_RE = re.compile(r"(?<![A-Za-z0-9+/=])[A-Za-z0-9+/]{86}==(?![A-Za-z0-9+/=])")  # 64 bytes in base64
DATE_RE = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d")  # the tool's yyyy-MM-dd'T'HH:mm


def mask_tokens(text: str) -> str:
    """The tool's transcript without HMACs, dates and the token ids it printed (each token's row
    starts with its id, then its HMAC)."""
    text = HMAC_RE.sub("<hmac>", DATE_RE.sub("<date>", text))
    ids = set(re.findall(r"tokenId : (\S+)", text)) | set(re.findall(r"^(\S+) +<hmac> ", text, re.MULTILINE))
    for token_id in ids:
        text = text.replace(token_id, "<token-id>")
    return text


def jaas(user: str, password: str, token: bool = False) -> str:
    return (f'org.apache.kafka.common.security.scram.ScramLoginModule required username="{user}" '
            f'password="{password}"' + (' tokenauth="true"' if token else "") + ";")


def client_config(path: Path, user: str, password: str, token: bool = False) -> str:
    path.write_text("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=SCRAM-SHA-512\n"
                    f"sasl.jaas.config={jaas(user, password, token)}\n")
    return str(path)


def tokens_scenario(t: Tools, setup: TokenBroker, work: Path) -> None:
    carol = client_config(work / "carol.properties", "carol", USERS["carol"])
    dt = "kafka-delegation-tokens"
    created = t.run(dt, "--command-config", carol, "--create", "--max-life-time-period", "-1",
                    "--renewer-principal", "User:bob")
    token_id = re.search(r"tokenId : (\S+)", created.stdout).group(1)
    hmac = re.search(rf"\n{re.escape(token_id)}\s+(\S+)", created.stdout).group(1)
    t.run(dt, "--command-config", carol, "--describe", "--owner-principal", "User:carol")
    t.run(dt, "--command-config", carol, "--describe")  # no owners: an empty list, so none
    t.run(dt, "--command-config", carol, "--renew", "--hmac", hmac, "--renew-time-period", "-1")
    t.run(dt, "--command-config", carol, "--renew", "--hmac", "bm90LWEtdG9rZW4=", "--renew-time-period", "-1",
          errors=True)

    # The token logs in as carol, who may do anything but manage tokens.
    token = client_config(work / "token.properties", token_id, hmac, token=True)
    t.run(dt, "--command-config", token, "--describe", "--owner-principal", "User:carol", errors=True)
    topic = "tokens-topic"
    t.run("kafka-topics", "--command-config", token, "--create", "--topic", topic, "--partitions", "1")
    t.run("kafka-console-producer", "--command-config", token, "--topic", topic, stdin="one\ntwo\n")
    t.run("kafka-console-consumer", "--command-config", token, "--topic", topic, "--from-beginning",
          "--max-messages", "2", "--timeout-ms", "30000")

    t.run(dt, "--command-config", carol, "--create", "--max-life-time-period", "3600000",
          "--owner-principal", "User:bob")  # KIP-373: no ACL denies carol CREATE_TOKENS on User:bob
    t.run(dt, "--command-config", carol, "--describe", "--owner-principal", "User:carol")  # both, in Kafka's order
    t.run(dt, "--command-config", carol, "--expire", "--hmac", hmac, "--expiry-time-period", "-1")
    t.run(dt, "--command-config", carol, "--describe", "--owner-principal", "User:carol")  # bob's, carol requested it
    # stdout says why; what the admin client logs on stderr depends on how many connections it tried.
    t.run("kafka-topics", "--command-config", token, "--list")


def test_kafka_delegation_tokens_tool_and_a_token_login(brokers, tmp_path, log4j2):  # noqa: F811
    def one(kind):
        setup = brokers[kind]
        work = tmp_path / kind
        work.mkdir()
        tools = Tools(setup.sasl_bootstrap, work, log4j2)
        tokens_scenario(tools, setup, work)
        return tools

    with ThreadPoolExecutor(2) as ex:
        done = dict(zip(brokers, ex.map(one, brokers)))
    out = {}
    for kind, tools in done.items():
        setup = brokers[kind]
        text = mask_tokens("\n".join(tools.transcript))
        out[kind] = normalize(text, setup.sasl_bootstrap, setup.broker.data_dir).replace(str(tmp_path / kind), "<work>")
        (tmp_path / kind / "stderr.txt").write_text("\n".join(tools.stderr))
        (tmp_path / kind / "transcript.txt").write_text(out[kind])
    import difflib
    diff = "\n".join(difflib.unified_diff(out["kafka"].splitlines(), out["samsa"].splitlines(), "kafka", "samsa",
                                          lineterm=""))
    assert out["samsa"] == out["kafka"], f"{diff}\n(the tools' stderr: {tmp_path}/*/stderr.txt)"
    assert "Created delegation token" in out["samsa"] and "one\ntwo" in out["samsa"]


def test_an_expired_token_no_longer_logs_in(brokers):
    tokens = both(brokers, as_user("alice", create(), 3))
    errors = []
    for setup, token in zip(brokers.values(), tokens):
        password = base64.b64encode(bytes(token.hmac)).decode()
        wait_described(setup, bytes(token.hmac))
        login(setup, token.token_id, password, token_auth=True).close()
        with login(setup, "alice", USERS["alice"]) as client:
            assert client.call(ExpireToken(hmac=bytes(token.hmac), expiry_time_period_ms=-1), 2).error_code == 0
        wait_described(setup, bytes(token.hmac), present=False)
        errors.append(login_error(setup, token.token_id, password))
    assert errors[0] == errors[1]
    assert "invalid credentials with SASL mechanism SCRAM-SHA-512" in errors[0]
