"""A loopback forward proxy, for tests: HTTP (absolute-form requests, as a client sends for http:// URLs) or SOCKS5
(no authentication, or username/password), relaying bytes to the target and recording where each connection went.

    async with FakeProxy("socks5") as proxy:      # proxy.url == "socks5://127.0.0.1:PORT"
        ... a client configured with proxy.url ...
        assert proxy.targets == [("127.0.0.1", 8443), …]
"""
from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import struct
from urllib.parse import urlsplit


class FakeProxy:
    def __init__(self, kind: str = "http", *, username: str = "", password: str = "") -> None:
        if kind not in ("http", "socks5"):
            raise ValueError(kind)
        self.kind, self.username, self.password = kind, username, password
        self.targets: list[tuple[str, int]] = []  # one entry per relayed connection
        self.requests: list[str] = []  # HTTP: each request line seen first on a connection
        self.port = 0
        self._server: asyncio.AbstractServer | None = None
        self._tasks: set[asyncio.Task] = set()

    @property
    def url(self) -> str:
        auth = f"{self.username}:{self.password}@" if self.username else ""
        return f"{self.kind}://{auth}127.0.0.1:{self.port}"

    async def __aenter__(self) -> "FakeProxy":
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._server is not None
        self._server.close()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(self._server.wait_closed(), 2)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        try:
            if self.kind == "socks5":
                target, first = await self._socks5(reader, writer), b""
            else:
                target, first = await self._http(reader)
            if target is None:
                return
            self.targets.append(target)
            up_reader, up_writer = await asyncio.open_connection(*target)
            up_writer.write(first)
            await asyncio.gather(_pipe(reader, up_writer), _pipe(up_reader, writer))
        except (ConnectionError, asyncio.IncompleteReadError, OSError):
            pass
        finally:
            writer.close()
            self._tasks.discard(task)

    async def _http(self, reader: asyncio.StreamReader) -> tuple[tuple[str, int] | None, bytes]:
        head = await reader.readuntil(b"\r\n\r\n")
        line = head.split(b"\r\n", 1)[0].decode("latin-1")
        self.requests.append(line)
        url = urlsplit(line.split(" ")[1])
        return (url.hostname or "", url.port or 80), head

    async def _socks5(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> tuple[str, int] | None:
        version, count = await reader.readexactly(2)
        methods = await reader.readexactly(count)
        wanted = 2 if self.username else 0
        if version != 5 or wanted not in methods:
            writer.write(b"\x05\xff")
            return None
        writer.write(bytes([5, wanted]))
        if wanted == 2:
            _, ulen = await reader.readexactly(2)
            user = (await reader.readexactly(ulen)).decode()
            (plen,) = await reader.readexactly(1)
            password = (await reader.readexactly(plen)).decode()
            ok = user == self.username and password == self.password
            writer.write(b"\x01\x00" if ok else b"\x01\x01")
            if not ok:
                return None
        _, command, _, atyp = await reader.readexactly(4)
        if atyp == 1:
            host = str(ipaddress.IPv4Address(await reader.readexactly(4)))
        elif atyp == 3:
            (n,) = await reader.readexactly(1)
            host = (await reader.readexactly(n)).decode()
        else:
            host = str(ipaddress.IPv6Address(await reader.readexactly(16)))
        (port,) = struct.unpack("!H", await reader.readexactly(2))
        if command != 1:  # CONNECT only
            writer.write(b"\x05\x07\x00\x01" + bytes(6))
            return None
        writer.write(b"\x05\x00\x00\x01" + bytes(6))
        return host, port


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    except (ConnectionError, OSError):
        pass
    finally:
        with contextlib.suppress(Exception):
            writer.close()
