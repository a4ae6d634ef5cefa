"""Listening TCP sockets on several loopback addresses, all on one port: the stand-in "sshd" of the
Chameleon tests (``tests/unit/chi_harness.py``) and of ``bench/status_scale.py`` (each node's SSH
probe connects to its own address on that port)."""

from __future__ import annotations

import socket


def listen_all(addresses: list[str], backlog: int) -> tuple[list[socket.socket], int]:
    """One listening socket per address, all bound to the same free port, each with a 0.2 s accept
    timeout (so a serving loop notices when it should stop); returns (sockets, port)."""
    socks: list[socket.socket] = []
    port = 0
    for addr in addresses:
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind((addr, port))
        port = s.getsockname()[1]
        s.listen(backlog)
        s.settimeout(0.2)
        socks.append(s)
    return socks, port
