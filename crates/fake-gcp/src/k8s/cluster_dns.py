"""The fake cluster's DNS for the Python of its pods (the fake kubelet puts
this module first on each container's PYTHONPATH, as ``sitecustomize``).

A real pod resolves through the cluster's DNS server, which answers
``{hostname}.{subdomain}.{namespace}.svc.cluster.local`` with the pod's IP
address. The fake's pods are processes of the host, whose resolver knows
nothing of the cluster, so names are looked up here first, in the records
the fake kubelet publishes (``hosts`` beside this file, read at each
lookup, written whole), with the search domains a pod's ``resolv.conf``
has (``svc.cluster.local``, ``cluster.local``); every other name goes to
the host's resolver. ``PYTHONPATH`` keeps the directory, so that every
Python process of the container resolves as a pod's processes all do; the
module takes it off ``sys.path`` (imports are the job's own) and imports
the ``sitecustomize`` it hid, if there is one."""

import os
import socket
import sys

_DIR = os.path.dirname(os.path.abspath(__file__))
_HOSTS = os.path.join(_DIR, "hosts")
_SEARCH = ("", ".svc.cluster.local", ".cluster.local")


def _records():
    try:
        with open(_HOSTS) as f:
            lines = f.read().splitlines()
    except OSError:
        return {}
    table = {}
    for line in lines:
        parts = line.split()
        if len(parts) == 2:
            table[parts[1].lower()] = parts[0]
    return table


def _cluster_address(host):
    if not isinstance(host, str) or not host:
        return None
    name = host.rstrip(".").lower()
    table = _records()
    for suffix in _SEARCH:
        if name + suffix in table:
            return table[name + suffix]
    return None


_getaddrinfo = socket.getaddrinfo
_gethostbyname = socket.gethostbyname
_gethostbyname_ex = socket.gethostbyname_ex


def getaddrinfo(host, port, family=0, type=0, proto=0, flags=0):
    address = _cluster_address(host)
    return _getaddrinfo(address or host, port, family, type, proto, flags)


def gethostbyname(host):
    return _cluster_address(host) or _gethostbyname(host)


def gethostbyname_ex(host):
    address = _cluster_address(host)
    if address is None:
        return _gethostbyname_ex(host)
    return host.rstrip("."), [], [address]


socket.getaddrinfo = getaddrinfo
socket.gethostbyname = gethostbyname
socket.gethostbyname_ex = gethostbyname_ex


def _unhide():
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != _DIR]
    this = sys.modules.pop("sitecustomize", None)
    try:
        import sitecustomize  # noqa: F401  (the one this module hid)
    except ImportError:
        if this is not None:
            sys.modules["sitecustomize"] = this


_unhide()
