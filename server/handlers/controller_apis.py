"""The APIs only a controller answers that a KRaft cluster's broker serves by forwarding them to the
active controller (KafkaApis.forwardToController): DescribeQuorum (55), UnregisterBroker (64),
AddRaftVoter (80), RemoveRaftVoter (81), UnregisterController (82). Their schemas list the broker
listener; a broker that forwards to no controller (a single broker, a ZooKeeper cluster's) neither
serves nor advertises them. The versions are Kafka 4.4's.
"""

from __future__ import annotations

from ...wire.protocol import ApiKey
from . import handler


async def _never(ctx, request):
    # Served only where forwarded (Handler.controller_only): the controller answers; Kafka's
    # forwardToControllerOrFail fails the same way.
    raise RuntimeError(f"Unable to forward {ApiKey(ctx.api_key).name} to the controller")


for _api_key, _max_version in ((ApiKey.DESCRIBE_QUORUM, 2), (ApiKey.UNREGISTER_BROKER, 0),
                               (ApiKey.ADD_RAFT_VOTER, 1), (ApiKey.REMOVE_RAFT_VOTER, 0),
                               (ApiKey.UNREGISTER_CONTROLLER, 0)):
    handler(_api_key, 0, _max_version, controller_only=True)(_never)
