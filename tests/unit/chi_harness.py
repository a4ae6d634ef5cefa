"""Shared fixtures for the Chameleon tests: the HTTP-level fake, credentials, a loopback "sshd".

The fake answers at the HTTP level (requests-mock) so the real python-chi, blazarclient,
novaclient, neutronclient, glanceclient, openstacksdk and keystoneauth code runs. SSH checks go to
TCP listeners this module starts on loopback addresses, on a port the test passes as --ssh-port.
"""

from __future__ import annotations

import socket
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests_mock

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/, for the fakes package
from fakes.chameleon import RESOURCE_API, FakeChameleon
from fakes.loopback import listen_all

from serve_system.commands.provision import script_main


def lease_main(argv: list[str]) -> int:
    return script_main("lease", argv)


def launch_main(argv: list[str]) -> int:
    return script_main("launch", argv)


def status_main(argv: list[str]) -> int:
    return script_main("status", argv)


def teardown_main(argv: list[str]) -> int:
    return script_main("teardown", argv)


class LoopbackListener:
    """Accept-and-close TCP listeners on the given loopback addresses, all on one port."""

    def __init__(self, addresses: list[str]) -> None:
        self.socks, self.port = listen_all(addresses, backlog=16)
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=self._serve, args=(s,), daemon=True) for s in self.socks]
        for t in self._threads:
            t.start()

    def _serve(self, s: socket.socket) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = s.accept()
            except (TimeoutError, OSError):
                continue
            self._accepted(conn)

    def _accepted(self, conn: socket.socket) -> None:
        conn.close()

    def close(self) -> None:
        self._stop.set()
        for t in self._threads:
            t.join(timeout=2)
        for s in self.socks:
            s.close()


class SilentListener(LoopbackListener):
    """TCP listeners that accept and then never say a word: an SSH client waits there for the
    server's banner (a node whose sshd hangs), so a probe stays in flight until it is killed."""

    def __init__(self, addresses: list[str]) -> None:
        self.conns: list[socket.socket] = []
        self._lock = threading.Lock()
        super().__init__(addresses)

    def _accepted(self, conn: socket.socket) -> None:
        with self._lock:
            self.conns.append(conn)

    def accepted(self) -> int:
        with self._lock:
            return len(self.conns)

    def open_peers(self, wait: float) -> int:
        """How many accepted connections the client still holds open after ``wait`` seconds."""
        with self._lock:
            conns = list(self.conns)
        deadline = time.monotonic() + wait
        still = 0
        for c in conns:
            c.settimeout(max(0.01, deadline - time.monotonic()))
            try:
                while c.recv(4096):  # whatever the client sent; b"" once it closed (or died)
                    pass
            except TimeoutError:
                still += 1
            except OSError:
                pass
        return still

    def close(self) -> None:
        super().close()
        for c in self.conns:
            c.close()


ADDRESSES = ["127.0.0.1", "127.0.0.2", "127.0.0.3", "127.0.0.4"]


@pytest.fixture
def sshd() -> Iterator[LoopbackListener]:
    listener = LoopbackListener(ADDRESSES)
    yield listener
    listener.close()


@pytest.fixture
def chi_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """A clean environment with an (unscoped) application credential; returns a work dir."""
    import os

    for name in list(os.environ):
        if name.startswith("OS_"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("CHI_RESOURCE_API_URL", RESOURCE_API)
    monkeypatch.setenv("OS_APPLICATION_CREDENTIAL_ID", "appcred-id")
    monkeypatch.setenv("OS_APPLICATION_CREDENTIAL_SECRET", "appcred-secret")
    monkeypatch.setenv("OS_PROJECT_NAME", "CHI-123")  # must NOT end up scoping the app credential
    monkeypatch.setenv("USER", "tester")
    import chi.context

    # python-chi reads CHI_RESOURCE_API_URL once, at import: the fake's URL must be the one it read
    assert chi.context.RESOURCE_API_URL == RESOURCE_API, \
        "chi was imported before CHI_RESOURCE_API_URL was set"
    return tmp_path


@pytest.fixture
def fake(chi_env: Path) -> Iterator[FakeChameleon]:
    f = FakeChameleon(fip_pool=list(ADDRESSES))
    with requests_mock.Mocker() as m:
        f.install(m)
        yield f


def launch_args(work: Path, port: int, *extra: str) -> list[str]:
    return [
        "--key-name", "mykey", "--key-path", str(work / "id_test"), "--inventory", str(work / "hosts.yml"),
        "--ssh-port", str(port), "--ssh-timeout", "5", "--poll", "0.01", "--lease-timeout", "5",
        "--server-timeout", "5", *extra,
    ]
