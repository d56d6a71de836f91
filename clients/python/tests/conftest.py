"""Test fixtures: a real ``hermes serve`` per test session (and one with
TLS and authentication for the security tests), on free loopback ports
with a fresh data directory, stopped by its PID at teardown.

The binary is ``$HERMES_BIN``, default ``bin/hermes`` of the repository
(``make build`` at the repository root makes it).
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import ssl
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
import uuid
from pathlib import Path
from typing import Iterator, Optional, Sequence

import pytest

import hermes

HERE = Path(__file__).resolve().parent
PROJECT = HERE.parent  # clients/python
REPO = PROJECT.parent.parent


def hermes_bin() -> Path:
    env = os.environ.get("HERMES_BIN")
    return Path(env) if env else (PROJECT / "../../bin/hermes").resolve()


def _free_ports(n: int) -> list[int]:
    """n distinct free loopback ports (held together while chosen)."""
    socks = []
    try:
        for _ in range(n):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind(("127.0.0.1", 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


class Broker:
    """One ``hermes serve`` process."""

    def __init__(self, extra_args: Sequence[str] = (), *, ca_file: Optional[str] = None) -> None:
        self.bin = hermes_bin()
        if not self.bin.is_file():
            pytest.fail(
                f"the hermes binary is not at {self.bin}: build it with `make build` at the repository root, "
                "or set HERMES_BIN"
            )
        self.extra_args = list(extra_args)
        self.ca_file = ca_file
        self.dir = Path(tempfile.mkdtemp(prefix="hermes-py-test-"))
        self.proc: Optional[subprocess.Popen] = None
        self.grpc_addr = ""
        self.http_addr = ""
        self._ports: Optional[tuple[int, ...]] = None

    @property
    def log_path(self) -> Path:
        return self.dir / "hermes.log"

    def log(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except OSError:
            return ""

    def start(self) -> "Broker":
        """Starts the node; again on the same ports and data after stop()."""
        # A port found free may be taken before the node binds it: then the
        # node is started again on other ports.
        for attempt in range(1, 4):
            if self._ports is None or attempt > 1:
                self._ports = tuple(_free_ports(3))
            grpc_port, http_port, raft_port = self._ports
            self.grpc_addr = f"127.0.0.1:{grpc_port}"
            self.http_addr = f"127.0.0.1:{http_port}"
            args = [
                str(self.bin),
                "serve",
                "--data-dir",
                str(self.dir / "data"),
                "--grpc-addr",
                self.grpc_addr,
                "--http-addr",
                self.http_addr,
                "--raft-addr",
                f"127.0.0.1:{raft_port}",
                "--kafka-addr",
                "",
                "--wire-addr",
                "",
                "--log-level",
                "warn",
                *self.extra_args,
            ]
            with open(self.log_path, "ab") as logf:
                self.proc = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=logf, stderr=logf)
            err = self._wait_ready()
            if err is None:
                return self
            self.stop()
            if attempt < 3 and "address already in use" in err:
                continue
            raise RuntimeError(err)
        raise AssertionError("unreachable")

    def _ready(self) -> bool:
        scheme = "https" if self.ca_file else "http"
        ctx = ssl.create_default_context(cafile=self.ca_file) if self.ca_file else None
        try:
            with urllib.request.urlopen(f"{scheme}://{self.http_addr}/readyz", timeout=2, context=ctx) as r:
                return r.status == 200
        except (urllib.error.URLError, OSError, ConnectionError):
            return False

    def _wait_ready(self) -> Optional[str]:
        deadline = time.monotonic() + 30
        while True:
            assert self.proc is not None
            code = self.proc.poll()
            if code is not None:
                return f"hermes serve exited ({code}) before it was ready:\n{self.log()}"
            if self._ready():
                return None
            if time.monotonic() > deadline:
                return f"hermes serve was not ready in 30 s:\n{self.log()}"
            time.sleep(0.05)

    def stop(self) -> None:
        """Stops the process (by its PID): SIGTERM, then SIGKILL."""
        p = self.proc
        if p is None or p.poll() is not None:
            return
        p.send_signal(signal.SIGTERM)
        try:
            p.wait(timeout=15)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait(timeout=10)

    def cleanup(self) -> None:
        self.stop()
        shutil.rmtree(self.dir, ignore_errors=True)


@pytest.fixture(scope="session")
def broker() -> Iterator[Broker]:
    """A plain node (no TLS, no authentication) shared by the tests."""
    b = Broker().start()
    try:
        yield b
    finally:
        if b.proc is not None and b.proc.poll() is not None:
            print(f"--- hermes serve exited early; its log ---\n{b.log()}")
        b.cleanup()


@pytest.fixture
async def client(broker: Broker):
    async with hermes.Client(broker.grpc_addr, timeout=15) as c:
        yield c


@pytest.fixture
def topic_name(request: pytest.FixtureRequest):
    """Makes unique topic names for the test."""

    def make(tag: str = "") -> str:
        base = request.node.name.replace("[", "-").replace("]", "").replace("_", "-")[:60]
        return f"py-{base}{'-' + tag if tag else ''}-{uuid.uuid4().hex[:8]}"

    return make
