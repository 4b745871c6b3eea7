"""Test hosts in network namespaces, for network-partition tests: each host (a broker, ZooKeeper)
is a namespace of its own with one veth link to a bridge in the root namespace, which has an
address on the same private /24. So the test process (root namespace) reaches every host over the
bridge, as Jepsen's clients do, while the hosts reach each other over the same bridge, on links
the test cuts selectively:

    net = Network()
    zk, b1 = net.host("zk"), net.host("b1")
    net.place(server, b1)          # a ServerProcess: `ip netns exec NS ...`, listening on b1.address
    net.cut(b1, zk)                # both ways: b1 and zk no longer reach each other
    net.heal()                     # every link whole again
    net.close()                    # namespaces, bridge and links gone

A cut is a blackhole route to the peer's /32 in each of the two namespaces (there is no iptables
or nftables here): a packet for the peer is dropped where it would leave, so established
connections see silence (their retransmissions go nowhere), and a new connection attempt fails at
once (EINVAL), as a host with no route would; the test's own address is never cut.

Names carry the creating process's id (hex) and a sequence number, so concurrent runs do not meet,
and `Network()` first removes what a killed earlier run left behind (its process is gone): its
namespaces (and any process still inside them), bridges and links. Requires root or CAP_NET_ADMIN
and `ip`; `unavailable()` says why not, for a skip.
"""

from __future__ import annotations

import atexit
import ipaddress
import itertools
import os
import re
import shutil
import signal
import subprocess

NAMESPACE_PREFIX = "samsa-net-"
LINK_PREFIX = "sn"  # + 6 hex digits of the pid + 2 of the sequence: interface names have 15 characters at most
SUBNETS = ipaddress.ip_network("10.231.0.0/16")  # one /24 of it per Network
_OWNER = re.compile(rf"^(?:{NAMESPACE_PREFIX}|{LINK_PREFIX})([0-9a-f]{{6}})[0-9a-f]{{2}}")
_sequence = itertools.count(1)
_open: set[Network] = set()


def ip(*args: str, namespace: str | None = None, check: bool = True) -> str:
    cmd = ["ip", *args] if namespace is None else ["ip", "netns", "exec", namespace, "ip", *args]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=30)
    if check and done.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)}: {done.stderr.strip() or done.returncode}")
    return done.stdout


def unavailable() -> str | None:
    """Why this machine cannot make the test's namespaces, or None."""
    if not shutil.which("ip"):
        return "no `ip` command (iproute2)"
    probe = f"{NAMESPACE_PREFIX}{os.getpid():06x}00-probe"
    try:
        ip("netns", "add", probe)
    except RuntimeError as e:
        return f"cannot make a network namespace (root or CAP_NET_ADMIN needed): {e}"
    ip("netns", "del", probe, check=False)
    return None


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
        return True
    except ProcessLookupError:
        return False
    except PermissionError:
        return True


def remove_leftovers() -> None:
    """Namespaces and links of runs whose process is gone (killed before its teardown)."""
    for line in ip("netns", "list").splitlines():
        name = line.split()[0] if line.strip() else ""
        owner = _OWNER.match(name)
        if owner and not _alive(int(owner.group(1), 16)):
            for pid in ip("netns", "pids", name, check=False).split():
                try:
                    os.kill(int(pid), signal.SIGKILL)
                except (ProcessLookupError, ValueError):
                    pass
            ip("netns", "del", name, check=False)
    for line in ip("-o", "link", "show").splitlines():
        name = line.split(":")[1].strip().split("@")[0]
        owner = _OWNER.match(name)
        if owner and not _alive(int(owner.group(1), 16)):
            ip("link", "del", name, check=False)


class Host:
    def __init__(self, name: str, namespace: str, address: str) -> None:
        self.name = name
        self.namespace = namespace
        self.address = address

    @property
    def command_prefix(self) -> list[str]:
        return ["ip", "netns", "exec", self.namespace]

    def __repr__(self) -> str:
        return f"<Host {self.name} {self.address} in {self.namespace}>"


class Network:
    def __init__(self) -> None:
        remove_leftovers()
        self.tag = f"{os.getpid():06x}{next(_sequence) % 256:02x}"
        self.bridge = f"{LINK_PREFIX}{self.tag}br"
        self.subnet = self._free_subnet()
        self.gateway = str(self.subnet.network_address + 1)  # the test's own address, never cut
        self.hosts: dict[str, Host] = {}
        self.cuts: set[tuple[str, str]] = set()  # (namespace, blackholed address)
        _open.add(self)
        ip("link", "add", self.bridge, "type", "bridge")
        ip("addr", "add", f"{self.gateway}/{self.subnet.prefixlen}", "dev", self.bridge)
        ip("link", "set", self.bridge, "up")

    def _free_subnet(self) -> ipaddress.IPv4Network:
        """A /24 of SUBNETS that no address or route of the machine's uses yet; the first one tried
        depends on the tag, so that two runs starting at once are unlikely to try the same."""
        used = ip("-4", "-o", "addr", "show") + ip("-4", "route", "show", "table", "all")
        candidates = list(SUBNETS.subnets(new_prefix=24))
        start = int(self.tag, 16) % len(candidates)
        for subnet in candidates[start:] + candidates[:start]:
            if f"{subnet.network_address}".rsplit(".", 1)[0] + "." not in used:
                return subnet
        raise RuntimeError(f"no free /24 left in {SUBNETS}")

    def host(self, name: str) -> Host:
        """A new namespace linked to the bridge, with the next address of the subnet."""
        index = len(self.hosts) + 1
        namespace = f"{NAMESPACE_PREFIX}{self.tag}-{name}"
        outside, inside = f"{LINK_PREFIX}{self.tag}v{index}", f"{LINK_PREFIX}{self.tag}h{index}"
        address = str(self.subnet.network_address + 1 + index)
        ip("netns", "add", namespace)
        self.hosts[name] = host = Host(name, namespace, address)
        ip("link", "set", "lo", "up", namespace=namespace)
        ip("link", "add", outside, "type", "veth", "peer", "name", inside)
        ip("link", "set", inside, "netns", namespace)
        ip("link", "set", outside, "master", self.bridge)
        ip("link", "set", outside, "up")
        ip("addr", "add", f"{address}/{self.subnet.prefixlen}", "dev", inside, namespace=namespace)
        ip("link", "set", inside, "up", namespace=namespace)
        return host

    def place(self, server, host: Host):
        """Have a ServerProcess (server_process.py) run on `host`: in its namespace, on its address."""
        server.host = host.address
        server.command_prefix = host.command_prefix
        return server

    def cut(self, a: Host, b: Host) -> None:
        """Neither reaches the other any more, until heal()."""
        for here, there in ((a, b), (b, a)):
            if (here.namespace, there.address) not in self.cuts:
                ip("route", "add", "blackhole", f"{there.address}/32", namespace=here.namespace)
                self.cuts.add((here.namespace, there.address))

    def isolate(self, host: Host) -> None:
        """`host` cut off from every other host (the test still reaches it)."""
        for other in self.hosts.values():
            if other is not host:
                self.cut(host, other)

    def heal(self) -> None:
        for namespace, address in sorted(self.cuts):
            ip("route", "del", "blackhole", f"{address}/32", namespace=namespace)
        self.cuts.clear()

    def close(self) -> None:
        """Everything this network made, gone (processes still inside keep their namespace alive,
        without its name, until they exit)."""
        _open.discard(self)
        for host in self.hosts.values():
            ip("netns", "del", host.namespace, check=False)
        for link in [self.bridge, *(f"{LINK_PREFIX}{self.tag}v{i}" for i in range(1, len(self.hosts) + 1))]:
            ip("link", "del", link, check=False)
        self.hosts.clear()


@atexit.register
def _close_open_networks() -> None:
    for network in list(_open):
        network.close()
