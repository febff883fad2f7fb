"""Topology: the SkyPilot-style variables every host of a job gets, and the
addresses of the slice's hosts."""

from __future__ import annotations

import json
import time

from .protocol import ENVIRONMENT, warn


# How long a host of a slice waits for its hosts' names to resolve (the
# cluster's DNS publishes a pod once it has an address, and a slice's pods
# start together but not at once) before it gives up on addresses.
RESOLVE_TIMEOUT_SECONDS = 300.0


def lws_host_addresses(environ) -> list:
    """The addresses of a LeaderWorkerSet group's hosts, leader first, from
    the variables its controller sets: the leader is ``LWS_LEADER_ADDRESS``
    (``{set}-{group}.{subdomain}.{namespace}``) and worker ``i`` (1 to
    ``LWS_GROUP_SIZE - 1``) is ``{set}-{group}-{i}`` in the same subdomain.
    Empty when either variable is missing or malformed."""
    leader = (environ.get("LWS_LEADER_ADDRESS") or "").strip()
    size = (environ.get("LWS_GROUP_SIZE") or "").strip()
    if not leader or "$(" in leader or not size.isdigit() or int(size) < 1:
        return []
    head, dot, rest = leader.partition(".")
    if not head:
        return []
    return [leader] + ["%s-%d%s%s" % (head, i, dot, rest) for i in range(1, int(size))]


def _is_ip(text: str) -> bool:
    import ipaddress
    try:
        ipaddress.ip_address(text)
    except ValueError:
        return False
    return True


def _lookup(name: str) -> str:
    """The first address ``name`` resolves to (IPv4 first), as the system's
    resolver (the cluster's DNS in a pod) answers; ``OSError`` when it does not."""
    import socket
    infos = socket.getaddrinfo(name, None, 0, socket.SOCK_STREAM)
    infos.sort(key=lambda info: info[0] != socket.AF_INET)
    if not infos:
        raise OSError("no address for %s" % name)
    return infos[0][4][0]


def resolve_hosts(names, lookup=None, timeout=RESOLVE_TIMEOUT_SECONDS, clock=time.monotonic,
                  sleep=time.sleep) -> tuple:
    """``(addresses, unresolved)``: each name's address, in the names' order,
    looked up again (waits growing from 0.1 s to 2 s) until every name
    resolves or ``timeout`` seconds have passed; an unresolved name stays as
    it is and is listed in ``unresolved``. An address is kept as it is.
    ``lookup`` (a name to its address) is :func:`_lookup` unless given."""
    lookup = lookup or _lookup
    found = {name: name for name in names if _is_ip(name)}
    deadline = clock() + timeout
    wait = 0.1
    while True:
        for name in names:
            if name not in found:
                try:
                    found[name] = _lookup_checked(lookup, name)
                except (OSError, UnicodeError):  # a label IDNA refuses is no name either
                    pass
        missing = [name for name in names if name not in found]
        if not missing or clock() >= deadline:
            return [found.get(name, name) for name in names], missing
        sleep(min(wait, max(0.0, deadline - clock())))
        wait = min(wait * 2, 2.0)


def _lookup_checked(lookup, name: str) -> str:
    address = lookup(name)
    if not isinstance(address, str) or not _is_ip(address):
        raise OSError("%s resolved to %r, not an address" % (name, address))
    return address


def node_addresses(spec, environ) -> list:
    """The addresses of the job's hosts, in rank order: the
    backend's ``KINETIC_NODE_IPS`` (one per line), else the spec's, else a
    LeaderWorkerSet group's host names resolved to addresses (the same list
    on every host of the group)."""
    if environ.get("KINETIC_NODE_IPS", "").strip() and "KINETIC_NODE_IPS" not in spec.env_names:
        return [line.strip() for line in environ["KINETIC_NODE_IPS"].splitlines() if line.strip()]
    if spec.node_ips:
        return list(spec.node_ips)
    names = lws_host_addresses(environ)
    if not names:
        return []
    addresses, unresolved = resolve_hosts(names)
    if unresolved:
        warn(ENVIRONMENT, "%d of %d host name%s did not resolve in %ds (%s): KINETIC_NODE_IPS names them" % (
            len(unresolved), len(names), "" if len(names) == 1 else "s", RESOLVE_TIMEOUT_SECONDS,
            ", ".join(unresolved)))
    return addresses


def gpus_given(spec, environ) -> int:
    """The GPUs the job holds on its host: on the local backend, the devices
    it was given (``CUDA_VISIBLE_DEVICES`` as the backend set it, not as
    the job captured it); elsewhere the accelerator's count, which is what
    the job's pod requests."""
    raw = environ.get("CUDA_VISIBLE_DEVICES")
    if spec.cloud != "local" or raw is None or "CUDA_VISIBLE_DEVICES" in spec.env_names:
        return spec.num_gpus_per_node
    devices = []
    for entry in raw.split(","):
        entry = entry.strip()
        # CUDA stops at the first entry that names no device.
        if not entry or entry.startswith("-"):
            break
        devices.append(entry)
    return len(devices)


# The SkyPilot names of the variables, for tasks written for SkyPilot.
SKYPILOT_NAMES = {
    "KINETIC_NODE_RANK": "SKYPILOT_NODE_RANK",
    "KINETIC_NODE_IPS": "SKYPILOT_NODE_IPS",
    "KINETIC_NUM_NODES": "SKYPILOT_NUM_NODES",
    "KINETIC_NUM_GPUS_PER_NODE": "SKYPILOT_NUM_GPUS_PER_NODE",
    "KINETIC_TASK_ID": "SKYPILOT_TASK_ID",
    "KINETIC_CLUSTER_INFO": "SKYPILOT_CLUSTER_INFO",
}


def topology_env(spec, host_index: int, environ) -> dict:
    """``KINETIC_*`` topology variables for this host, and the same facts
    under SkyPilot's names (``SKYPILOT_*``): its rank, the hosts' IP
    addresses in rank order (:func:`node_addresses`), the number of hosts,
    GPUs (:func:`gpus_given`) and accelerators per host, a task id that
    stays the same when the job is retried or its hosts are restarted (the
    job id), and a JSON description of the cluster (its name, cloud,
    region and zone, with all of the above) in ``KINETIC_CLUSTER_INFO``."""
    node_ips = node_addresses(spec, environ)
    if node_ips and len(node_ips) != spec.num_nodes:
        warn(ENVIRONMENT, "%d host address%s for %d host%s" % (
            len(node_ips), "" if len(node_ips) == 1 else "es", spec.num_nodes, "" if spec.num_nodes == 1 else "s"))
    gpus = gpus_given(spec, environ)
    task_id = spec.job_id
    env = {
        "KINETIC_NODE_RANK": str(host_index),
        "KINETIC_NUM_NODES": str(spec.num_nodes),
        "KINETIC_NODE_IPS": "\n".join(node_ips),
        "KINETIC_NUM_GPUS_PER_NODE": str(gpus),
        "KINETIC_NUM_ACCELERATORS_PER_NODE": str(spec.num_accelerators_per_node),
        "KINETIC_TASK_ID": task_id,
        "KINETIC_CLUSTER_INFO": json.dumps({
            "cluster_name": spec.cluster_name,
            "cloud": spec.cloud,
            "region": spec.region,
            "zone": spec.zone,
            "job_id": spec.job_id,
            "task_id": task_id,
            "node_rank": host_index,
            "num_nodes": spec.num_nodes,
            "node_ips": node_ips,
            "num_gpus_per_node": gpus,
            "num_accelerators_per_node": spec.num_accelerators_per_node,
            "accelerator": spec.accelerator,
        }),
    }
    for name, alias in SKYPILOT_NAMES.items():
        env[alias] = env[name]
    return env
