"""The metadata every broker of a ZooKeeper cluster shares through ZooKeeper, as Kafka 3.9 keeps it:
topic configs in /config/topics/<t>, client quotas and SCRAM credentials in /config/users,
/config/clients and /config/ips (a user's quotas and credentials in one znode), ACLs in
/kafka-acl/<ResourceType>/<name> and /kafka-acl-extended/prefixed/<ResourceType>/<name>.

Writes are Kafka's (ZkAdminManager and AdminZkClient.changeConfigs for entity configs, then a
/config/changes/config_change_<seq> notification; AclAuthorizer.updateResourceAcls for ACLs, then
an acl_changes_<seq> under /kafka-acl-changes or /kafka-acl-extended-changes). Every broker, the
writer too, watches those notifications (Kafka's ZkConfigManager and ZkNodeChangeNotificationListener,
AclAuthorizer's change listeners), reads the named entity or resource again and applies it: topic
configs to the logs, quotas to the quota manager, credentials to SCRAM authentication, ACLs to the
authorizer. At startup everything is read once (ZkConfigManager.startup, AclAuthorizer.loadCache).

Group configs (KIP-932's share.* and KIP-848's consumer.* on the GROUP config resource), which
Kafka keeps only in KRaft's metadata, are kept the same way in /config/groups/<sanitized id>, but
their notifications go to a path of Samsa's own (zk_data.GROUP_CONFIG_CHANGES, see there why): every
Samsa broker reads them all at startup and applies each change, a Kafka 3.9 broker never sees them.

What is kept here, in the single broker's shapes (server/metadata/image.py's MetadataCache): the client
quotas by entity, the SCRAM credentials by user and mechanism, the ACLs as bindings.

Not kept: client-metrics resources (KIP-714 subscriptions). Kafka 3.9 in ZooKeeper mode has none (its
ZkConfigRepository and ZkAdminManager refuse the resource type, and it serves no telemetry API), so
a broker in a ZooKeeper cluster refuses them the same way (server/config/client_metrics_configs.py).
"""

from __future__ import annotations

import base64
import logging
from collections.abc import Callable, Iterable, Mapping
from urllib.parse import quote, unquote

import trio

from ...client.scram import ScramMechanism
from ...coordinator.client_quotas import CLIENT_ID, CLIENT_QUOTA_KEYS, IP, IP_QUOTA_KEYS, USER, Entity
from ...wire import zk_data
from ..clock import wall_clock_ms
from ..config.kafka_config import java_double
from ..security.authorizer import AclBinding, AclOperation, AclPermissionType, PatternType, ResourceType
from ..security.delegation_tokens import DelegationTokens, TokenInformation, parse_principal
from ..security.scram import ScramCredential

log = logging.getLogger("samsa.zk.config")

DEFAULT_ENTITY = "<default>"  # Kafka's ConfigEntityName.DEFAULT, never sanitized
QUOTA_ENTITY_TYPES = ("users", "clients", "ips")
ACL_PATTERN_TYPES = (PatternType.LITERAL, PatternType.PREFIXED)
# Kafka's ZkNodeChangeNotificationListener.changeExpirationMs: older processed notifications are deleted.
CHANGE_EXPIRATION_MS = 15 * 60 * 1000
# How often a watcher checks that its watch did not go with an expired session (then it reads again).
RESCAN_INTERVAL_S = 60.0


# -- names ------------------------------------------------------------------------------------------

def sanitize(name: str) -> str:
    """Kafka's Sanitizer.sanitize: URLEncoder's form ('*' and ' ' as %2A and %20), for znode names."""
    return quote(name, safe="").replace("~", "%7E")


def desanitize(name: str) -> str:
    return unquote(name)


def entity_name(name: str | None) -> str:
    """A quota entity's name in its znode path: sanitized, or <default>."""
    return DEFAULT_ENTITY if name is None else sanitize(name)


def _named(sanitized: str) -> str | None:
    return None if sanitized == DEFAULT_ENTITY else desanitize(sanitized)


def quota_entity_path(entity: Entity) -> tuple[str, str, bool]:
    """The entity's znode as ZkAdminManager.alterClientQuotas names it: (config type, sanitized
    name under it, whether a user's client id)."""
    parts = dict(entity)
    if IP in parts:
        return "ips", entity_name(parts[IP]), False
    if USER in parts and CLIENT_ID in parts:
        return "users", f"{entity_name(parts[USER])}/clients/{entity_name(parts[CLIENT_ID])}", True
    if USER in parts:
        return "users", entity_name(parts[USER]), False
    return "clients", entity_name(parts[CLIENT_ID]), False


def entity_of_path(entity_path: str) -> Entity | None:
    """The quota entity of an entity path ('users/alice/clients/c', 'ips/<default>'), None for
    other config types."""
    parts = entity_path.split("/")
    if parts[0] == "users" and len(parts) == 4 and parts[2] == "clients":
        return ((CLIENT_ID, _named(parts[3])), (USER, _named(parts[1])))
    if len(parts) != 2:
        return None
    kind = {"users": USER, "clients": CLIENT_ID, "ips": IP}.get(parts[0])
    return None if kind is None else ((kind, _named(parts[1])),)


def quota_value(key: str, value: float) -> str:
    """How ZkAdminManager.alterClientQuotas writes a value: integral types as integers, DOUBLE as Java does."""
    config_type = {**CLIENT_QUOTA_KEYS, **IP_QUOTA_KEYS}[key]
    return str(int(value + 1e-6)) if config_type in ("LONG", "INT") else java_double(float(value))


def credential_to_string(credential: ScramCredential) -> str:
    """ScramCredentialUtils.credentialToString."""
    encode = lambda b: base64.b64encode(b).decode()  # noqa: E731
    return (f"salt={encode(credential.salt)},stored_key={encode(credential.stored_key)},"
            f"server_key={encode(credential.server_key)},iterations={credential.iterations}")


def credential_from_string(text: str) -> ScramCredential:
    """ScramCredentialUtils.credentialFromString."""
    fields = dict(part.split("=", 1) for part in text.split(","))
    return ScramCredential(base64.b64decode(fields["salt"]), base64.b64decode(fields["stored_key"]),
                           base64.b64decode(fields["server_key"]), int(fields["iterations"]))


def _camel(enum_name: str) -> str:
    """An enum constant's name as Kafka's SecurityUtils spells it in ACL znodes: TRANSACTIONAL_ID -> TransactionalId."""
    return "".join(word.capitalize() for word in enum_name.split("_"))


# SecurityUtils.resourceType, operation and permissionType: each enum's constants by their znode names.
_RESOURCE_TYPES = {_camel(e.name): e for e in ResourceType}
_OPERATIONS = {_camel(e.name): e for e in AclOperation}
_PERMISSION_TYPES = {_camel(e.name): e for e in AclPermissionType}


def acl_entry(acl: AclBinding) -> zk_data.AclEntry:
    return zk_data.AclEntry(acl.principal, _camel(acl.permission.name), _camel(acl.operation.name), acl.host)


def acl_binding(resource: tuple[ResourceType, PatternType, str], entry: zk_data.AclEntry) -> AclBinding:
    resource_type, pattern_type, name = resource
    return AclBinding(resource_type, name, pattern_type, entry.principal, entry.host, _OPERATIONS[entry.operation],
                      _PERMISSION_TYPES[entry.permission_type])


def acl_path(resource: tuple[ResourceType, PatternType, str]) -> str:
    resource_type, pattern_type, name = resource
    return zk_data.acl_resource_path(pattern_type.name, _camel(resource_type.name), name)


class ZkSharedMetadata:
    """The ZooKeeper half of a cluster broker's shared metadata: what ZooKeeper holds, kept current by
    its change notifications, and Kafka's writes. `on_topic_configs(topic, overrides)`,
    `on_quotas_changed()` and `on_acls_changed(bindings)` apply a change to the broker."""

    def __init__(self, client, broker_id: int, on_topic_configs: Callable[[str, dict[str, str]], None],
                 on_quotas_changed: Callable[[], None], on_acls_changed: Callable[[list[AclBinding]], None],
                 on_broker_configs: Callable[[], None],
                 on_group_configs: Callable[[str, dict[str, str]], None] | None = None,
                 delegation_tokens: DelegationTokens | None = None) -> None:
        self.client = client
        # The delegation tokens' cache, kept as /delegation_token/tokens holds them (when tokens are enabled).
        self.delegation_tokens = delegation_tokens if delegation_tokens is not None and delegation_tokens.enabled \
            else None
        self._last_token_change = -1
        self.broker_id = broker_id
        self._on_broker_configs = on_broker_configs
        self._on_topic_configs = on_topic_configs
        self._on_quotas_changed = on_quotas_changed
        self._on_acls_changed = on_acls_changed
        self._on_group_configs = on_group_configs
        # Read by the quota manager and SCRAM authentication, replaced in place / by attribute.
        self.client_quotas: dict[Entity, dict[str, float]] = {}
        self.scram_credentials: dict[str, dict[str, dict]] = {}
        # Dynamic broker configs of this broker (by its id) and the cluster default ("").
        self.broker_configs: dict[str, dict[str, str]] = {}
        # Each quota entity's znode as read: entity path ('users/alice') -> overrides.
        self._entity_configs: dict[str, dict[str, str]] = {}
        # Each ACL resource's entries and znode version.
        self._acls: dict[tuple[ResourceType, PatternType, str], tuple[list[AclBinding], int]] = {}
        self._last_config_change = -1
        self._last_group_config_change = -1
        self._last_acl_change = {PatternType.LITERAL: -1, PatternType.PREFIXED: -1}
        self._acl_lock = trio.Lock()

    @property
    def acls(self) -> list[dict[str, str]]:
        return [acl.to_json() for acl in self.acl_bindings()]

    def acl_bindings(self) -> list[AclBinding]:
        return [acl for resource in sorted(self._acls, key=_resource_order) for acl in self._acls[resource][0]]

    # --- startup ----------------------------------------------------------------------------------

    async def load(self) -> None:
        """Everything ZooKeeper holds now, and the notifications so far taken as seen."""
        self._last_config_change = _last_sequence(await self.client.get_children(zk_data.CONFIG_CHANGES),
                                                  zk_data.CONFIG_CHANGE_PREFIX)
        self._last_group_config_change = _last_sequence(
            await self.client.get_children(zk_data.GROUP_CONFIG_CHANGES), zk_data.CONFIG_CHANGE_PREFIX)
        for pattern_type in ACL_PATTERN_TYPES:
            self._last_acl_change[pattern_type] = _last_sequence(
                await self.client.get_children(zk_data.acl_change_store_path(pattern_type.name)),
                zk_data.ACL_CHANGE_PREFIX)
        for entity_type in QUOTA_ENTITY_TYPES:
            for name in await self.client.get_children(zk_data.config_entity_type_path(entity_type)):
                await self._read_entity(f"{entity_type}/{name}")
                if entity_type == "users":
                    clients = f"{name}/clients"
                    for client_id in await self.client.get_children(zk_data.config_entity_path("users", clients)):
                        await self._read_entity(f"users/{clients}/{client_id}")
        self._derive_quotas_and_credentials()
        for name in (DEFAULT_ENTITY, str(self.broker_id)):
            await self._read_broker_configs(name)
        groups = await self.client.get_children(zk_data.config_entity_type_path(zk_data.GROUP_CONFIGS))
        for name in groups:
            await self._read_group_configs(name)
        for pattern_type in ACL_PATTERN_TYPES:
            store = zk_data.acl_store_path(pattern_type.name)
            for type_name in await self.client.get_children(store):
                resource_type = _RESOURCE_TYPES.get(type_name)
                if resource_type is None:
                    continue  # AclAuthorizer.loadCache: "Ignoring unknown ResourceType"
                for name in await self.client.get_children(f"{store}/{type_name}"):
                    await self._read_acls((resource_type, pattern_type, name))
        if self.delegation_tokens is not None:
            await self._load_delegation_tokens()
        log.info("Loaded from ZooKeeper: client quotas of %d entities, SCRAM credentials of %d users, "
                 "%d ACLs, configs of %d groups", len(self.client_quotas), len(self.scram_credentials),
                 len(self.acl_bindings()), len(groups))

    # --- watching the notifications -----------------------------------------------------------------

    async def run(self, *, task_status=trio.TASK_STATUS_IGNORED) -> None:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self._watch, zk_data.CONFIG_CHANGES, zk_data.CONFIG_CHANGE_PREFIX,
                               self._config_changes, lambda: self._last_config_change)
            nursery.start_soon(self._watch, zk_data.GROUP_CONFIG_CHANGES, zk_data.CONFIG_CHANGE_PREFIX,
                               self._group_config_changes, lambda: self._last_group_config_change)
            for pattern_type in ACL_PATTERN_TYPES:
                nursery.start_soon(self._watch, zk_data.acl_change_store_path(pattern_type.name),
                                   zk_data.ACL_CHANGE_PREFIX,
                                   lambda children, p=pattern_type: self._acl_changes(p, children),
                                   lambda p=pattern_type: self._last_acl_change[p])
            if self.delegation_tokens is not None:
                nursery.start_soon(self._watch, zk_data.DELEGATION_TOKEN_CHANGES, zk_data.DELEGATION_TOKEN_CHANGE_PREFIX,
                                   self._token_changes, lambda: self._last_token_change)
            task_status.started()

    async def _watch(self, path: str, prefix: str, process, last_processed: Callable[[], int]) -> None:
        """ZkNodeChangeNotificationListener: on every change of `path`'s children, the new ones in
        sequence order; then the processed ones older than CHANGE_EXPIRATION_MS are purged."""
        token = trio.lowlevel.current_trio_token()
        while True:
            changed = trio.Event()

            def watcher(_event, changed=changed) -> None:
                try:
                    token.run_sync_soon(changed.set)
                except trio.RunFinishedError:
                    pass
            session = self.client.session_id
            try:
                await process(await self.client.get_children(path, watch=watcher))
                await self.client.purge_obsolete_notifications(path, prefix, last_processed(),
                                                               wall_clock_ms() - CHANGE_EXPIRATION_MS)
            except Exception:  # noqa: BLE001 - a bad notification or a lost connection: next time
                log.exception("Error processing the notifications under %s", path)
            # Until the children change, or the watch went with an expired session.
            while self.client.session_id == session:
                with trio.move_on_after(RESCAN_INTERVAL_S):
                    await changed.wait()
                    break

    async def _config_changes(self, children: list[str]) -> None:
        for sequence, child in _new_notifications(children, zk_data.CONFIG_CHANGE_PREFIX, self._last_config_change):
            entity_path = await self._read_config_change(zk_data.CONFIG_CHANGES, child)
            self._last_config_change = sequence  # a notification that cannot be read is skipped, as Kafka's
            if entity_path is not None:
                await self.entity_changed(entity_path)

    async def _group_config_changes(self, children: list[str]) -> None:
        for sequence, child in _new_notifications(children, zk_data.CONFIG_CHANGE_PREFIX,
                                                  self._last_group_config_change):
            entity_path = await self._read_config_change(zk_data.GROUP_CONFIG_CHANGES, child)
            self._last_group_config_change = sequence
            if entity_path is not None:
                entity_type, _, name = entity_path.partition("/")
                if entity_type == zk_data.GROUP_CONFIGS:
                    await self._read_group_configs(name)

    async def _read_config_change(self, path: str, child: str) -> str | None:
        """A notification's entity path, None when it is gone or unreadable."""
        found = await self.client.get_data(f"{path}/{child}")
        if found is None:
            return None
        try:
            entity_path = zk_data.decode_config_change(found[0])
        except (zk_data.ZkDataError, KeyError, ValueError) as e:
            log.error("Skipping the unreadable config change %s: %s", child, e)
            return None
        log.info("Processing override for entityPath: %s", entity_path)
        return entity_path

    async def _acl_changes(self, pattern_type: PatternType, children: list[str]) -> None:
        store = zk_data.acl_change_store_path(pattern_type.name)
        for sequence, child in _new_notifications(children, zk_data.ACL_CHANGE_PREFIX,
                                                  self._last_acl_change[pattern_type]):
            found = await self.client.get_data(f"{store}/{child}")
            self._last_acl_change[pattern_type] = sequence  # an unreadable one is skipped, as Kafka's
            if found is None or found[0] is None:
                continue
            try:
                if pattern_type == PatternType.LITERAL:
                    type_name, name = zk_data.decode_literal_acl_change(found[0])
                    resource = (ResourceType[type_name], PatternType.LITERAL, name)
                else:
                    type_name, name, pattern_name = zk_data.decode_extended_acl_change(found[0])
                    resource = (ResourceType[type_name], PatternType[pattern_name], name)
            except (zk_data.ZkDataError, KeyError, ValueError, UnicodeDecodeError) as e:
                log.error("Skipping the unreadable ACL change %s: %s", child, e)
                continue
            async with self._acl_lock:
                await self._read_acls(resource)
                log.info("Processing Acl change notification for %s", resource)
            self._on_acls_changed(self.acl_bindings())

    # --- delegation tokens (DelegationTokenManagerZk) ------------------------------------------------

    async def _load_delegation_tokens(self) -> None:
        """startup: createDelegationTokenPaths, loadCache, and the notifications so far taken as seen."""
        for path in (zk_data.DELEGATION_TOKEN_CHANGES, zk_data.DELEGATION_TOKENS):
            await self.client.create_persistent_path(path)
        self._last_token_change = _last_sequence(await self.client.get_children(zk_data.DELEGATION_TOKEN_CHANGES),
                                                 zk_data.DELEGATION_TOKEN_CHANGE_PREFIX)
        token_ids = await self.client.get_children(zk_data.DELEGATION_TOKENS)
        log.info("Loading the token cache. Total token count: %d", len(token_ids))
        for token_id in token_ids:
            await self._read_delegation_token(token_id)

    async def _token_changes(self, children: list[str]) -> None:
        """TokenChangedNotificationHandler: the named token read again (gone: removed from the cache)."""
        for sequence, child in _new_notifications(children, zk_data.DELEGATION_TOKEN_CHANGE_PREFIX,
                                                  self._last_token_change):
            found = await self.client.get_data(f"{zk_data.DELEGATION_TOKEN_CHANGES}/{child}")
            self._last_token_change = sequence
            if found is None or not found[0]:
                continue
            token_id = found[0].decode("utf-8", "replace")
            log.info("Processing Token Notification for tokenId: %s", token_id)
            await self._read_delegation_token(token_id)

    async def _read_delegation_token(self, token_id: str) -> None:
        assert self.delegation_tokens is not None
        found = await self.client.get_data(zk_data.delegation_token_path(token_id))
        try:
            info = None if found is None else zk_data.decode_delegation_token(found[0])
            token = None if info is None else _token_information(info)
        except (zk_data.ZkDataError, KeyError, ValueError) as e:
            log.error("Error while getting Token for tokenId: %s: %s", token_id, e)
            return
        if token is None:
            self.delegation_tokens.remove(token_id)
        else:
            self.delegation_tokens.update(token)

    async def store_delegation_token(self, token: TokenInformation) -> None:
        """DelegationTokenManagerZk.updateToken: the znode, the cache, the notification."""
        assert self.delegation_tokens is not None
        info = zk_data.DelegationTokenInfo(
            token.token_id, sanitize(str(token.owner)), sanitize(str(token.requester)),
            tuple(sanitize(str(r)) for r in token.renewers), token.issue_timestamp, token.max_timestamp,
            token.expiry_timestamp)
        await self.client.set_or_create_delegation_token(token.token_id, zk_data.encode_delegation_token(info))
        self.delegation_tokens.update(token)

    async def remove_delegation_token(self, token_id: str) -> None:
        """DelegationTokenManagerZk.removeToken."""
        assert self.delegation_tokens is not None
        await self.client.delete_delegation_token(token_id)
        self.delegation_tokens.remove(token_id)

    async def entity_changed(self, entity_path: str) -> None:
        """ConfigHandler.processConfigChanges for the entity: read it again and apply it."""
        entity_type, _, name = entity_path.partition("/")
        if entity_type == "topics":
            self._on_topic_configs(name, await self.client.get_entity_config("topics", name))
        elif entity_type in QUOTA_ENTITY_TYPES:
            await self._read_entity(entity_path)
            self._derive_quotas_and_credentials()
            self._on_quotas_changed()
        elif entity_type == "brokers" and name in (DEFAULT_ENTITY, str(self.broker_id)):
            await self._read_broker_configs(name)
            self._on_broker_configs()

    async def _read_group_configs(self, name: str) -> None:
        """/config/groups/<sanitized id>: the group's configs, applied here (none: the defaults again)."""
        configs = await self.client.get_entity_config(zk_data.GROUP_CONFIGS, name)
        if self._on_group_configs is not None:
            self._on_group_configs(desanitize(name), configs)

    async def _read_broker_configs(self, name: str) -> None:
        """/config/brokers/<id> or <default> (DynamicBrokerConfig: the broker's own and the cluster's)."""
        configs = await self.client.get_entity_config("brokers", name)
        key = "" if name == DEFAULT_ENTITY else name
        if configs:
            self.broker_configs[key] = configs
        else:
            self.broker_configs.pop(key, None)

    async def _read_entity(self, entity_path: str) -> None:
        entity_type, _, name = entity_path.partition("/")
        configs = await self.client.get_entity_config(entity_type, name)
        if configs:
            self._entity_configs[entity_path] = configs
        else:
            self._entity_configs.pop(entity_path, None)

    def _derive_quotas_and_credentials(self) -> None:
        quotas: dict[Entity, dict[str, float]] = {}
        credentials: dict[str, dict[str, dict]] = {}
        for entity_path, configs in self._entity_configs.items():
            entity = entity_of_path(entity_path)
            if entity is None:
                continue
            keys = IP_QUOTA_KEYS if entity[0][0] == IP else CLIENT_QUOTA_KEYS
            values = {k: float(v) for k, v in configs.items() if k in keys}
            if values:
                quotas[entity] = values
            if entity_path.count("/") == 1 and entity_path.startswith("users/") and entity[0][1] is not None:
                for mechanism in ScramMechanism:
                    text = configs.get(mechanism.mechanism_name)
                    if text is not None:
                        try:
                            credential = credential_from_string(text)
                        except (KeyError, ValueError):
                            log.error("Unreadable %s credential of user %s", mechanism.mechanism_name, entity[0][1])
                            continue
                        credentials.setdefault(entity[0][1], {})[mechanism.mechanism_name] = credential.to_json()
        self.client_quotas.clear()
        self.client_quotas.update(quotas)
        self.scram_credentials = credentials

    async def _read_acls(self, resource) -> None:
        found = await self.client.get_data(acl_path(resource))
        entries = [] if found is None else zk_data.decode_acls(found[0])
        if entries:
            self._acls[resource] = ([acl_binding(resource, e) for e in entries], found[1])
        else:
            self._acls.pop(resource, None)

    # --- writes -------------------------------------------------------------------------------------

    async def change_topic_config(self, topic: str, configs: dict[str, str]) -> None:
        """AdminZkClient.changeTopicConfig: the broker applies it on its notification."""
        await self.client.change_entity_config("topics", topic, configs)

    async def change_broker_config(self, resource_name: str, configs: dict[str, str]) -> None:
        """AdminZkClient.changeBrokerConfig: a broker's id, or "" for <default>."""
        name = resource_name or DEFAULT_ENTITY
        await self.client.change_entity_config("brokers", name, configs)
        await self.entity_changed(f"brokers/{name}")

    async def group_configs(self, group_id: str) -> dict[str, str]:
        """The group's configs as ZooKeeper holds them now."""
        return await self.client.get_entity_config(zk_data.GROUP_CONFIGS, sanitize(group_id))

    async def change_group_config(self, group_id: str, configs: dict[str, str]) -> None:
        """The group's configs written with their notification; every broker applies them (this one
        at once, not only when its watch fires)."""
        name = sanitize(group_id)
        await self.client.change_entity_config(zk_data.GROUP_CONFIGS, name, configs,
                                               changes_path=zk_data.GROUP_CONFIG_CHANGES)
        await self._read_group_configs(name)

    async def alter_client_quotas(self, changes: Mapping[Entity, Mapping[str, float | None]]) -> None:
        """ZkAdminManager.alterClientQuotas, the checks already made: each entity's znode as read,
        changed and written with its notification."""
        for entity, entity_changes in changes.items():
            entity_type, name, is_user_client_id = quota_entity_path(entity)
            configs = await self.client.get_entity_config(entity_type, name)
            for key, value in entity_changes.items():
                if value is None:
                    configs.pop(key, None)
                else:
                    configs[key] = quota_value(key, value)
            await self.client.change_entity_config(entity_type, name, configs, is_user_client_id)
            await self.entity_changed(f"{entity_type}/{name}")

    async def alter_scram_credentials(self, deletions: Mapping[str, ScramMechanism],
                                      upsertions: Mapping[str, tuple[ScramMechanism, ScramCredential]]) -> None:
        """ZkAdminManager.alterUserScramCredentials' writes: each user's znode (quotas kept) with
        the mechanism's key removed or set to Kafka's credential string."""
        for user in dict.fromkeys([*deletions, *upsertions]):
            name = sanitize(user)
            configs = await self.client.get_entity_config("users", name)
            if user in deletions:
                configs.pop(deletions[user].mechanism_name, None)
            if user in upsertions:
                mechanism, credential = upsertions[user]
                configs[mechanism.mechanism_name] = credential_to_string(credential)
            await self.client.change_entity_config("users", name, configs)
            await self.entity_changed(f"users/{name}")

    async def store_acls(self, acls: Iterable[AclBinding]) -> None:
        """AclAuthorizer.updateResourceAcls for every resource whose ACLs differ from `acls`: its
        znode written (created, set at its version, or deleted when none is left; read again and
        retried when another broker wrote it meanwhile), then the change notification."""
        wanted: dict[tuple[ResourceType, PatternType, str], list[AclBinding]] = {}
        for acl in acls:
            wanted.setdefault((acl.resource_type, acl.pattern_type, acl.name), []).append(acl)
        async with self._acl_lock:
            for resource in sorted(set(wanted) | set(self._acls), key=_resource_order):
                current, version = self._acls.get(resource, ([], None))
                new = wanted.get(resource, [])
                if set(new) == set(current):
                    continue
                added = [acl for acl in new if acl not in current]
                removed = set(current) - set(new)
                while True:
                    merged = [acl for acl in current if acl not in removed] + [a for a in added if a not in current]
                    data = zk_data.encode_acls(acl_entry(a) for a in merged) if merged else None
                    written = await self.client.write_resource_acls(acl_path(resource), data, version)
                    if written is not None:
                        break
                    await self._read_acls(resource)
                    current, version = self._acls.get(resource, ([], None))
                if merged:
                    self._acls[resource] = (merged, written)
                else:
                    self._acls.pop(resource, None)
                log.info("Updated ACLs for %s with new version %d", resource, written)
                resource_type, pattern_type, name = resource
                if pattern_type == PatternType.LITERAL:
                    notification = zk_data.encode_literal_acl_change(resource_type.name, name)
                else:
                    notification = zk_data.encode_extended_acl_change(resource_type.name, name, pattern_type.name)
                await self.client.create_acl_change_notification(
                    zk_data.acl_change_store_path(pattern_type.name), notification)
        self._on_acls_changed(self.acl_bindings())


def _token_information(info: zk_data.DelegationTokenInfo) -> TokenInformation:
    return TokenInformation(info.token_id, parse_principal(desanitize(info.owner)),
                            parse_principal(desanitize(info.token_requester)),
                            tuple(parse_principal(desanitize(r)) for r in info.renewers), info.issue_timestamp,
                            info.max_timestamp, info.expiry_timestamp)


def _resource_order(resource) -> tuple:
    resource_type, pattern_type, name = resource
    return (int(resource_type), int(pattern_type), name)


def _last_sequence(children: list[str], prefix: str) -> int:
    return max((int(zk_data.sequence_number(c, prefix)) for c in children if c.startswith(prefix)), default=-1)


def _new_notifications(children: list[str], prefix: str, last: int) -> list[tuple[int, str]]:
    found = sorted((int(zk_data.sequence_number(c, prefix)), c) for c in children if c.startswith(prefix))
    return [(sequence, child) for sequence, child in found if sequence > last]

