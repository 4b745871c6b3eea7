"""`samsa cluster`: the brokers and the controller, as Metadata tells them (a first command, and
the smallest example of one)."""

from __future__ import annotations

import argparse

import trio

from .client import add_connection_arguments, open_client

HELP = "show the cluster's id, brokers and controller"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_connection_arguments(parser)


def run(args: argparse.Namespace) -> int:
    return trio.run(show, args)


async def show(args: argparse.Namespace) -> int:
    async with open_client(args) as client:
        metadata = await client.metadata([])
    print(f"cluster id: {metadata.cluster_id}")
    print(f"controller: {metadata.controller_id}")
    for broker in sorted(metadata.brokers, key=lambda b: b.node_id):
        print(f"broker {broker.node_id}: {broker.host}:{broker.port}" + (f" rack {broker.rack}" if broker.rack else ""))
    return 0
