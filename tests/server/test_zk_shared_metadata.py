"""server/zookeeper/shared_metadata.py without a ZooKeeper: Kafka's names and value formats (Sanitizer,
ScramCredentialUtils, ACL znode spellings), and ZkSharedMetadata loading, writing and
following change notifications over an in-memory stand-in for KafkaZkClient (compat-tests/
test_zookeeper_configs.py runs it against a real ZooKeeper with Kafka 3.9 beside it)."""

from __future__ import annotations

import json

import pytest
import trio

from samsa.server.security.authorizer import AclBinding, AclOperation, AclPermissionType, PatternType, ResourceType
from samsa.server.security.scram import ScramCredential, ScramMechanism
from samsa.server.zookeeper.shared_metadata import (
    ZkSharedMetadata,
    acl_binding,
    acl_entry,
    credential_from_string,
    credential_to_string,
    entity_of_path,
    quota_entity_path,
    quota_value,
    sanitize,
)
from samsa.wire import zk_data


@pytest.mark.parametrize(("name", "sanitized"), [
    ("alice", "alice"), ("a b", "a%20b"), ("x*y", "x%2Ay"), ("CN=a,O=b", "CN%3Da%2CO%3Db"), ("é~", "%C3%A9%7E"),
    ("A-z_0.9", "A-z_0.9"),
])
def test_sanitize_as_kafkas_sanitizer(name, sanitized):
    assert sanitize(name) == sanitized


def test_quota_values_and_entity_paths():
    assert quota_value("producer_byte_rate", 1024.0) == "1024"
    assert quota_value("request_percentage", 12.5) == "12.5"
    assert quota_value("connection_creation_rate", 7.0) == "7"
    for entity, path in [
        ((("user", "a b"),), ("users", "a%20b", False)),
        ((("user", None),), ("users", "<default>", False)),
        ((("client-id", "c"), ("user", "u")), ("users", "u/clients/c", True)),
        ((("client-id", None), ("user", None)), ("users", "<default>/clients/<default>", True)),
        ((("client-id", "c"),), ("clients", "c", False)),
        ((("ip", "10.0.0.1"),), ("ips", "10.0.0.1", False)),
    ]:
        assert quota_entity_path(entity) == path
        assert entity_of_path(f"{path[0]}/{path[1]}") == entity
    assert entity_of_path("topics/t") is None and entity_of_path("brokers/<default>") is None


def test_credential_string_is_scram_credential_utils():
    credential = ScramCredential(b"salt", b"stored", b"server", 4096)
    text = credential_to_string(credential)
    assert text == "salt=c2FsdA==,stored_key=c3RvcmVk,server_key=c2VydmVy,iterations=4096"
    assert credential_from_string(text) == credential


def test_acl_entries_spelt_as_in_kafkas_znodes():
    acl = AclBinding(ResourceType.TRANSACTIONAL_ID, "tx", PatternType.PREFIXED, "User:a", "*",
                     AclOperation.DESCRIBE_CONFIGS, AclPermissionType.DENY)
    entry = acl_entry(acl)
    assert entry == zk_data.AclEntry("User:a", "Deny", "DescribeConfigs", "*")
    assert acl_binding((ResourceType.TRANSACTIONAL_ID, PatternType.PREFIXED, "tx"), entry) == acl


class FakeZk:
    """The KafkaZkClient calls ZkSharedMetadata makes, over a dict of znodes (data, version)."""

    def __init__(self) -> None:
        self.nodes: dict[str, tuple[bytes | None, int]] = {}
        self.sequence = 0
        self.watches: list = []
        self.session_id = 1

    def put(self, path: str, data: bytes | None) -> None:
        old = self.nodes.get(path)
        self.nodes[path] = (data, 0 if old is None else old[1] + 1)
        for watch in self.watches:
            watch(None)
        self.watches.clear()

    async def get_children(self, path: str, watch=None) -> list[str]:
        if watch is not None:
            self.watches.append(watch)
        prefix = path + "/"
        return sorted({p[len(prefix):].split("/")[0] for p in self.nodes if p.startswith(prefix)})

    async def get_data(self, path: str):
        return self.nodes.get(path)

    async def get_entity_config(self, entity_type: str, name: str) -> dict[str, str]:
        found = self.nodes.get(zk_data.config_entity_path(entity_type, name))
        return {} if found is None else zk_data.decode_config_entity(found[0])

    def notify(self, store: str, prefix: str, data: bytes) -> None:
        self.put(f"{store}/{prefix}{self.sequence:010d}", data)
        self.sequence += 1

    async def change_entity_config(self, entity_type, name, configs, is_user_client_id=False,
                                   changes_path=zk_data.CONFIG_CHANGES) -> None:
        self.put(zk_data.config_entity_path(entity_type, name), zk_data.encode_config_entity(configs))
        self.notify(changes_path, zk_data.CONFIG_CHANGE_PREFIX, zk_data.encode_config_change(f"{entity_type}/{name}"))

    async def write_resource_acls(self, path, data, version):
        current = self.nodes.get(path)
        if (current[1] if current else None) != version:
            return None
        if data is None:
            del self.nodes[path]
            return 0
        self.put(path, data)
        return self.nodes[path][1]

    async def purge_obsolete_notifications(self, path, prefix, up_to, before_ms) -> None:
        self.purged = (path, up_to)

    async def create_acl_change_notification(self, store_path, data) -> None:
        self.notify(store_path, zk_data.ACL_CHANGE_PREFIX, data)


class Applied:
    """What a broker was told to apply; `until` waits for a condition over it."""

    def __init__(self) -> None:
        self.topics: dict[str, dict[str, str]] = {}
        self.quota_changes = 0
        self.acls: list[AclBinding] = []
        self.broker_config_changes = 0
        self.groups: dict[str, dict[str, str]] = {}
        self._changed = trio.Event()

    def shared(self, zk: FakeZk) -> ZkSharedMetadata:
        return ZkSharedMetadata(zk, 1, self._topic, self._quotas, self._acls, self._brokers, self._group)

    async def until(self, condition) -> None:
        while not condition():
            self._changed = trio.Event()
            await self._changed.wait()

    def _topic(self, name, configs) -> None:
        self.topics[name] = configs
        self._changed.set()

    def _quotas(self) -> None:
        self.quota_changes += 1
        self._changed.set()

    def _acls(self, acls) -> None:
        self.acls = list(acls)
        self._changed.set()

    def _brokers(self) -> None:
        self.broker_config_changes += 1
        self._changed.set()

    def _group(self, group_id, configs) -> None:
        if configs:
            self.groups[group_id] = configs
        else:
            self.groups.pop(group_id, None)
        self._changed.set()


READ_T = AclBinding(ResourceType.TOPIC, "t", PatternType.LITERAL, "User:a", "*", AclOperation.READ,
                    AclPermissionType.ALLOW)
WRITE_T = AclBinding(ResourceType.TOPIC, "t", PatternType.LITERAL, "User:a", "*", AclOperation.WRITE,
                     AclPermissionType.ALLOW)
READ_G = AclBinding(ResourceType.GROUP, "g-", PatternType.PREFIXED, "User:a", "*", AclOperation.READ,
                    AclPermissionType.ALLOW)


def test_startup_reads_quotas_credentials_broker_configs_and_acls():
    zk = FakeZk()
    credential = ScramCredential(b"s", b"k", b"v", 4096)
    zk.put("/config/users/alice", zk_data.encode_config_entity(
        {"producer_byte_rate": "1024", "SCRAM-SHA-256": credential_to_string(credential)}))
    zk.put("/config/users/alice/clients/c", zk_data.encode_config_entity({"request_percentage": "50.0"}))
    zk.put("/config/ips/<default>", zk_data.encode_config_entity({"connection_creation_rate": "10"}))
    zk.put("/config/brokers/<default>", zk_data.encode_config_entity({"log.retention.bytes": "100"}))
    zk.put("/config/brokers/2", zk_data.encode_config_entity({"message.max.bytes": "5"}))  # another broker's
    zk.put("/kafka-acl/Topic/t", zk_data.encode_acls([zk_data.AclEntry("User:a", "Allow", "Read")]))
    zk.put("/kafka-acl-extended/prefixed/Group/g-", zk_data.encode_acls([zk_data.AclEntry("User:a", "Allow", "Read")]))
    zk.notify(zk_data.CONFIG_CHANGES, zk_data.CONFIG_CHANGE_PREFIX, zk_data.encode_config_change("users/alice"))
    applied = Applied()
    shared = applied.shared(zk)
    trio.run(shared.load)
    assert shared.client_quotas == {(("user", "alice"),): {"producer_byte_rate": 1024.0},
                                    (("client-id", "c"), ("user", "alice")): {"request_percentage": 50.0},
                                    (("ip", None),): {"connection_creation_rate": 10.0}}
    assert shared.scram_credentials == {"alice": {"SCRAM-SHA-256": credential.to_json()}}
    assert shared.broker_configs == {"": {"log.retention.bytes": "100"}}
    assert shared.acl_bindings() == [READ_T, READ_G]
    assert shared._last_config_change == 0  # the notifications so far are taken as seen


def test_writes_and_notifications_reach_every_broker():
    zk = FakeZk()
    writer, reader = Applied(), Applied()
    writing, reading = writer.shared(zk), reader.shared(zk)

    async def main():
        await writing.load()
        await reading.load()
        async with trio.open_nursery() as nursery:
            await nursery.start(reading.run)
            await writing.alter_client_quotas({(("user", "bob"),): {"consumer_byte_rate": 2048.0}})
            credential = ScramCredential(b"s", b"k", b"v", 8192)
            await writing.alter_scram_credentials({}, {"bob": (ScramMechanism.SCRAM_SHA_512, credential)})
            await writing.change_topic_config("t", {"retention.ms": "1000"})
            await writing.change_broker_config("", {"log.retention.bytes": "7"})
            await writing.store_acls([READ_T, WRITE_T, READ_G])
            # One user znode holds both the quota and the credential, as Kafka keeps them.
            assert zk_data.decode_config_entity(zk.nodes["/config/users/bob"][0]) == {
                "consumer_byte_rate": "2048", "SCRAM-SHA-512": credential_to_string(credential)}
            await reader.until(lambda: reader.acls == [READ_T, WRITE_T, READ_G] and "t" in reader.topics
                               and reading.broker_configs == {"": {"log.retention.bytes": "7"}}
                               and "bob" in reading.scram_credentials)
            assert reading.client_quotas == {(("user", "bob"),): {"consumer_byte_rate": 2048.0}}
            assert reader.topics == {"t": {"retention.ms": "1000"}}
            assert reader.broker_config_changes == 1
            # Deleting the last ACL of a resource deletes its znode, announced in the extended store.
            await writing.store_acls([READ_T, WRITE_T])
            assert "/kafka-acl-extended/prefixed/Group/g-" not in zk.nodes
            last = max(p for p in zk.nodes if p.startswith(zk_data.EXTENDED_ACL_CHANGES + "/"))
            assert zk.nodes[last][0] == zk_data.encode_extended_acl_change("GROUP", "g-", "PREFIXED")
            await reader.until(lambda: reader.acls == [READ_T, WRITE_T])
            nursery.cancel_scope.cancel()

    trio.run(main)


def test_an_acl_write_that_loses_a_race_reads_again_and_keeps_the_other_brokers_acl():
    zk = FakeZk()
    applied = Applied()
    shared = applied.shared(zk)

    async def main():
        await shared.load()
        await shared.store_acls([READ_T])
        # Another broker adds WRITE_T meanwhile: this broker's cache does not know it yet.
        zk.put("/kafka-acl/Topic/t", zk_data.encode_acls([acl_entry(READ_T), acl_entry(WRITE_T)]))
        read_g = AclBinding(ResourceType.TOPIC, "t", PatternType.LITERAL, "User:b", "*", AclOperation.READ,
                            AclPermissionType.ALLOW)
        await shared.store_acls([READ_T, read_g])
        assert zk_data.decode_acls(zk.nodes["/kafka-acl/Topic/t"][0]) == [
            acl_entry(READ_T), acl_entry(WRITE_T), acl_entry(read_g)]

    trio.run(main)


def test_an_unreadable_notification_is_skipped_and_the_next_one_applied():
    zk = FakeZk()
    applied = Applied()
    shared = applied.shared(zk)

    async def main():
        await shared.load()
        async with trio.open_nursery() as nursery:
            await nursery.start(shared.run)
            zk.notify(zk_data.LITERAL_ACL_CHANGES, zk_data.ACL_CHANGE_PREFIX, b"NO_SUCH_TYPE:x")
            zk.notify(zk_data.CONFIG_CHANGES, zk_data.CONFIG_CHANGE_PREFIX, b"not json")
            zk.put("/kafka-acl/Topic/t", zk_data.encode_acls([acl_entry(READ_T)]))
            zk.notify(zk_data.LITERAL_ACL_CHANGES, zk_data.ACL_CHANGE_PREFIX, b"TOPIC:t")
            zk.put("/config/topics/t", zk_data.encode_config_entity({"retention.ms": "5"}))
            zk.notify(zk_data.CONFIG_CHANGES, zk_data.CONFIG_CHANGE_PREFIX, zk_data.encode_config_change("topics/t"))
            await applied.until(lambda: applied.acls == [READ_T] and applied.topics == {"t": {"retention.ms": "5"}})
            nursery.cancel_scope.cancel()

    trio.run(main)


def test_group_configs_are_read_at_startup_and_every_broker_applies_a_change():
    """/config/groups/<sanitized id>, announced under Samsa's own path, never in /config/changes
    (a Kafka 3.9 broker would log an error for every such notification)."""
    zk = FakeZk()
    zk.put("/config/groups/g%2F1", zk_data.encode_config_entity({"share.delivery.count.limit": "3"}))
    writer, reader = Applied(), Applied()
    writing, reading = writer.shared(zk), reader.shared(zk)

    async def main():
        await writing.load()
        await reading.load()
        assert reader.groups == writer.groups == {"g/1": {"share.delivery.count.limit": "3"}}
        async with trio.open_nursery() as nursery:
            await nursery.start(reading.run)
            await writing.change_group_config("g/2", {"share.auto.offset.reset": "earliest"})
            assert writer.groups["g/2"] == {"share.auto.offset.reset": "earliest"}  # the writer at once
            await reader.until(lambda: "g/2" in reader.groups)
            await writing.change_group_config("g/1", {})
            await reader.until(lambda: "g/1" not in reader.groups)
            assert reader.groups == {"g/2": {"share.auto.offset.reset": "earliest"}}
            assert await reading.group_configs("g/2") == {"share.auto.offset.reset": "earliest"}
            nursery.cancel_scope.cancel()
        assert not [p for p in zk.nodes if p.startswith(zk_data.CONFIG_CHANGES + "/")]
        assert len([p for p in zk.nodes if p.startswith(zk_data.GROUP_CONFIG_CHANGES + "/")]) == 2

    trio.run(main)


class FakeZkWithTokens(FakeZk):
    """With KafkaZkClient's delegation token calls."""

    async def create_persistent_path(self, path: str) -> None:
        self.nodes.setdefault(path, (None, 0))

    async def set_or_create_delegation_token(self, token_id: str, data: bytes) -> None:
        self.put(zk_data.delegation_token_path(token_id), data)
        self.notify(zk_data.DELEGATION_TOKEN_CHANGES, zk_data.DELEGATION_TOKEN_CHANGE_PREFIX, token_id.encode())

    async def delete_delegation_token(self, token_id: str) -> None:
        self.nodes.pop(zk_data.delegation_token_path(token_id), None)
        self.notify(zk_data.DELEGATION_TOKEN_CHANGES, zk_data.DELEGATION_TOKEN_CHANGE_PREFIX, token_id.encode())


def test_delegation_tokens_are_shared_through_their_znodes_and_notifications():
    from samsa.server.context import KafkaPrincipal
    from samsa.server.security.delegation_tokens import DelegationTokens, TokenConfig, TokenInformation

    zk = FakeZkWithTokens()
    alice, bob = KafkaPrincipal("User", "alice"), KafkaPrincipal("User", "b b")
    already = TokenInformation("old", alice, alice, (), 1, 3, 2)
    zk.put(zk_data.delegation_token_path("old"), zk_data.encode_delegation_token(zk_data.DelegationTokenInfo(
        "old", "User%3Aalice", "User%3Aalice", (), 1, 3, 2)))
    caches = [DelegationTokens(TokenConfig("secret")) for _ in range(2)]
    writer, reader = Applied(), Applied()
    writing, reading = (ZkSharedMetadata(zk, 1, a._topic, a._quotas, a._acls, a._brokers, a._group, cache)
                        for a, cache in zip((writer, reader), caches))
    token = TokenInformation("new", alice, bob, (bob,), 10, 30, 20)

    async def main():
        await writing.load()
        await reading.load()
        assert caches[1].tokens == {"old": already}  # read at startup
        await writing.store_delegation_token(token)
        assert json.loads(zk.nodes[zk_data.delegation_token_path("new")][0])["renewers"] == ["User%3Ab%20b"]
        await reading._token_changes(await zk.get_children(zk_data.DELEGATION_TOKEN_CHANGES))
        assert caches[1].tokens["new"] == token
        assert caches[1].token_for_hmac(caches[0].hmac("new")) == token
        await writing.remove_delegation_token("old")
        await reading._token_changes(await zk.get_children(zk_data.DELEGATION_TOKEN_CHANGES))
        assert set(caches[0].tokens) == set(caches[1].tokens) == {"new"}

    trio.run(main)
