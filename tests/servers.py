"""Real servers for the scale-out tests, started by the tests themselves on free loopback ports and stopped at the
end: a throwaway PostgreSQL cluster (initdb + pg_ctl; as root, run as the `postgres` user, since PostgreSQL refuses
to run as root) and `chroma run`. A test is skipped, with the reason, only when the binaries are not installed.

Import the fixtures into a test module: `from tests.servers import chroma_url, pg_cluster, postgres_url`."""
from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
import uuid
from pathlib import Path

import pytest


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def pg_bin(name: str) -> str | None:
    found = shutil.which(name)
    if found:
        return found
    candidates = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"))
    return candidates[-1] if candidates else None


def chroma_bin() -> str | None:
    beside = Path(sys.executable).parent / "chroma"
    return str(beside) if beside.exists() else shutil.which("chroma")


class PgCluster:
    """A PostgreSQL cluster in a temporary folder; `new_database()` gives each test its own database."""

    def __init__(self) -> None:
        initdb, pg_ctl = pg_bin("initdb"), pg_bin("pg_ctl")
        if not (initdb and pg_ctl):
            pytest.skip("PostgreSQL binaries (initdb, pg_ctl) are not installed")
        self.pg_ctl = pg_ctl
        self.root = Path(tempfile.mkdtemp(prefix="coffeebot-pg-"))
        self.as_user: list[str] = []
        if os.geteuid() == 0:  # PostgreSQL will not run as root
            if shutil.which("runuser") is None:
                pytest.skip("running as root and runuser is not installed: cannot start PostgreSQL")
            try:
                shutil.chown(self.root, user="postgres")
            except LookupError:
                raise RuntimeError("tests run as root, and PostgreSQL refuses root: a `postgres` user is needed "
                                   "(`useradd --system postgres`) to run the throwaway cluster as") from None
            self.as_user = ["runuser", "-u", "postgres", "--"]
        self.data = self.root / "data"
        self.port = free_port()
        self._run([initdb, "-D", str(self.data), "-A", "trust", "-U", "postgres", "-E", "UTF8", "--no-sync"])
        opts = (f"-p {self.port} -k {self.root} -c listen_addresses=127.0.0.1 -c fsync=off "
                "-c max_connections=200")
        self._run([pg_ctl, "-D", str(self.data), "-w", "-t", "30", "-l", str(self.root / "log"), "-o", opts, "start"])
        self.url = f"postgresql://postgres@127.0.0.1:{self.port}/postgres"

    def _run(self, cmd: list[str]) -> None:
        proc = subprocess.run(self.as_user + cmd, capture_output=True, text=True, timeout=60)
        if proc.returncode != 0:
            raise RuntimeError(f"{cmd[0]} failed ({proc.returncode}): {proc.stderr[-2000:]}")

    def new_database(self) -> str:
        """A fresh, empty database; its URL."""
        name = f"t_{uuid.uuid4().hex[:12]}"
        psql = pg_bin("psql")
        if psql:
            self._run([psql, "-h", "127.0.0.1", "-p", str(self.port), "-U", "postgres", "-q", "-c",
                       f"CREATE DATABASE {name}"])
        else:
            import asyncio

            import asyncpg

            async def create() -> None:
                conn = await asyncpg.connect(self.url)
                try:
                    await conn.execute(f"CREATE DATABASE {name}")
                finally:
                    await conn.close()

            asyncio.run(create())
        return f"postgresql://postgres@127.0.0.1:{self.port}/{name}"

    def stop(self) -> None:
        try:
            self._run([self.pg_ctl, "-D", str(self.data), "-m", "immediate", "-w", "stop"])
        finally:
            shutil.rmtree(self.root, ignore_errors=True)


@pytest.fixture(scope="session")
def pg_cluster():
    cluster = PgCluster()
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture
def postgres_url(pg_cluster) -> str:
    """A fresh database on the session's throwaway PostgreSQL."""
    return pg_cluster.new_database()


class ChromaServer:
    def __init__(self, path: Path) -> None:
        binary = chroma_bin()
        if binary is None:
            pytest.skip("the `chroma` command (installed with chromadb) is not found")
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = open(path / "chroma.log", "wb")
        self.proc = subprocess.Popen([binary, "run", "--path", str(path / "chroma"), "--host", "127.0.0.1",
                                      "--port", str(self.port)], stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 30
        while True:
            try:
                with urllib.request.urlopen(f"{self.url}/api/v2/heartbeat", timeout=1):
                    break
            except OSError:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    self.stop()
                    raise RuntimeError(f"chroma run did not start: {(path / 'chroma.log').read_text()[-2000:]}")
                time.sleep(0.1)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()


@pytest.fixture(scope="session")
def chroma_url(tmp_path_factory):
    """`chroma run` on a free loopback port, for the session."""
    server = ChromaServer(tmp_path_factory.mktemp("chroma-server"))
    try:
        yield server.url
    finally:
        server.stop()
