"""A loopback fake of WeChat, both sides: the API our bot calls, and the platform that calls our bot.

`FakeWeChatAPI` serves `GET /cgi-bin/token` and `POST /cgi-bin/message/custom/send` on 127.0.0.1 in the test's
event loop (the bot calls it from a worker thread through wechatpy):

    async with FakeWeChatAPI() as api:           # api.base_url → [wechat] api_base_url
        api.fail_next(45015)                     # the next send is refused with this errcode
        api.expire_token()                       # the current token is now invalid (errcode 40001)
        await api.go_down(); await api.come_up() # connections refused meanwhile (requests' ConnectionError)
        await api.wait_for_pushes(1)
        api.pushes[0].content

Like WeChat it checks the appid and secret, the access token, and the 2048-byte limit of a text message.

`WeChatPlatform` plays WeChat's servers: it builds real messages, signs them, encrypts them in compatible and safe
mode with wechatpy's crypto, and delivers them to the callback the way WeChat does: a 5-second timeout per
delivery, re-sent (same MsgId) up to three times in all. Times are parameters, so tests can scale them down.
"""
from __future__ import annotations

import asyncio
import collections
import hashlib
import itertools
import json
import random
import string
import time
from dataclasses import dataclass
from typing import Literal
from xml.sax.saxutils import escape

import aiohttp
import xmltodict
from aiohttp import web
from wechatpy.crypto import WeChatCrypto

Mode = Literal["plain", "compatible", "safe"]


@dataclass(frozen=True)
class Push:
    touser: str
    content: str
    access_token: str
    at: float  # time.monotonic() when received


class FakeWeChatAPI:
    def __init__(self, appid: str = "wx0123456789abcdef", secret: str = "app-secret") -> None:
        self.appid, self.secret = appid, secret
        self.pushes: list[Push] = []
        self.refused: list[tuple[int, dict]] = []  # (errcode, request JSON) of sends answered with an error
        self.token_fetches = 0
        self._token: str | None = None
        self._failures: collections.deque[tuple[int, str]] = collections.deque()
        self._changed = asyncio.Event()
        self._runner: web.AppRunner | None = None
        self._site: web.TCPSite | None = None
        self.port = 0

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/cgi-bin/"

    def fail_next(self, errcode: int, errmsg: str = "") -> None:
        """Answer the next customer-service send with this error (e.g. 45015, 45047, 40001)."""
        self._failures.append((errcode, errmsg or f"fake error {errcode}"))

    def expire_token(self) -> None:
        """Invalidate the issued access token: sends carrying it get 40001 until a new one is fetched."""
        self._token = f"expired-{self._token}"

    async def wait_for_pushes(self, n: int, timeout: float = 10.0) -> list[Push]:
        deadline = time.monotonic() + timeout
        while len(self.pushes) < n:
            self._changed.clear()
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError(f"expected {n} pushes within {timeout} s, got {len(self.pushes)}")
            try:
                await asyncio.wait_for(self._changed.wait(), left)
            except TimeoutError:
                pass
        return self.pushes

    async def __aenter__(self) -> FakeWeChatAPI:
        app = web.Application()
        app.router.add_get("/cgi-bin/token", self._token_endpoint)
        app.router.add_post("/cgi-bin/message/custom/send", self._send)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        self._site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await self._site.start()
        self.port = self._runner.addresses[0][1]
        return self

    async def go_down(self) -> None:
        """Stop listening: the bot's calls are refused at connect, as when the network or WeChat is down."""
        if self._site is not None:
            await self._site.stop()
            self._site = None

    async def come_up(self) -> None:
        """Listen again on the same port."""
        if self._site is None and self._runner is not None:
            self._site = web.TCPSite(self._runner, "127.0.0.1", self.port)
            await self._site.start()

    async def __aexit__(self, *exc) -> None:
        if self._runner is not None:
            await self._runner.cleanup()

    async def _token_endpoint(self, request: web.Request) -> web.Response:
        q = request.query
        if q.get("grant_type") != "client_credential" or q.get("appid") != self.appid:
            return web.json_response({"errcode": 40013, "errmsg": "invalid appid"})
        if q.get("secret") != self.secret:
            return web.json_response({"errcode": 40125, "errmsg": "invalid appsecret"})
        self.token_fetches += 1
        self._token = f"TOKEN-{self.token_fetches}"
        return web.json_response({"access_token": self._token, "expires_in": 7200})

    async def _send(self, request: web.Request) -> web.Response:
        data = json.loads(await request.read())
        token = request.query.get("access_token", "")
        if self._failures:
            errcode, errmsg = self._failures.popleft()
        elif self._token is None or token != self._token:
            errcode, errmsg = 40001, "invalid credential, access_token is invalid or not latest"
        elif data.get("msgtype") != "text" or not data.get("touser"):
            errcode, errmsg = 40008, "invalid message type"
        elif len(data["text"]["content"].encode("utf-8")) > 2048:
            errcode, errmsg = 45002, "content size out of limit"
        else:
            self.pushes.append(Push(data["touser"], data["text"]["content"], token, time.monotonic()))
            self._changed.set()
            return web.json_response({"errcode": 0, "errmsg": "ok"})
        self.refused.append((errcode, data))
        self._changed.set()
        return web.json_response({"errcode": errcode, "errmsg": errmsg})


@dataclass(frozen=True)
class Delivery:
    n: int  # 1, 2, 3: which delivery of the message
    started: float  # seconds since the message was first sent
    elapsed: float  # until the response (or the timeout)
    status: int | None  # None: timed out or the connection failed
    reply: str | None  # "success", "" or the reply's Content (decrypted); None without a response

    def describe(self) -> str:
        what = ("no reply (timed out)" if self.status is None
                else f'HTTP {self.status} "{_short(self.reply or "")}"')
        return f"delivery {self.n} at t={self.started:.2f} s → {what} after {self.elapsed:.2f} s"


def _short(text: str, n: int = 28) -> str:
    one = text.replace("\n", " ")
    return one if len(one) <= n else one[:n] + "…"


def sign(token: str, *parts: str) -> str:
    return hashlib.sha1("".join(sorted([token, *parts])).encode()).hexdigest()


class WeChatPlatform:
    """WeChat's side of the callback: messages, signatures, encryption and re-delivery."""

    _ids = itertools.count(6054768590064713729)

    def __init__(self, url: str, token: str, appid: str, aes_key: str | None = None, mode: Mode = "plain",
                 account: str = "gh_10f6c3c3ac5a") -> None:
        self.url, self.token, self.appid, self.mode, self.account = url, token, appid, mode, account
        self.crypto = WeChatCrypto(token, aes_key, appid) if aes_key else None

    # --- messages ------------------------------------------------------------------------------------------------

    def text(self, openid: str, content: str, *, msg_id: int | None = None, create_time: int | None = None) -> str:
        return self._xml(openid, create_time, "text", f"<Content><![CDATA[{content}]]></Content>",
                         msg_id if msg_id is not None else next(self._ids))

    def image(self, openid: str) -> str:
        return self._xml(openid, None, "image", "<PicUrl><![CDATA[http://127.0.0.1/x.jpg]]></PicUrl>"
                         "<MediaId><![CDATA[media_id]]></MediaId>", next(self._ids))

    def event(self, openid: str, event: str = "subscribe", create_time: int | None = None) -> str:
        return self._xml(openid, create_time, "event", f"<Event><![CDATA[{event}]]></Event>", None)

    def _xml(self, openid: str, create_time: int | None, msg_type: str, body: str, msg_id: int | None) -> str:
        msg_id_xml = f"<MsgId>{msg_id}</MsgId>" if msg_id is not None else ""
        return (f"<xml><ToUserName><![CDATA[{self.account}]]></ToUserName>"
                f"<FromUserName><![CDATA[{escape(openid)}]]></FromUserName>"
                f"<CreateTime>{create_time if create_time is not None else int(time.time())}</CreateTime>"
                f"<MsgType><![CDATA[{msg_type}]]></MsgType>{body}{msg_id_xml}</xml>")

    # --- the wire ------------------------------------------------------------------------------------------------

    def request(self, xml: str, *, bad_signature: bool = False, timestamp: int | None = None
                ) -> tuple[dict[str, str], str]:
        """Query parameters and body for one delivery, signed (and encrypted) like WeChat does it (at `timestamp`,
        default now)."""
        timestamp = str(int(time.time()) if timestamp is None else timestamp)
        nonce = "".join(random.choices(string.digits, k=10))
        query = {"signature": sign(self.token, timestamp, nonce), "timestamp": timestamp, "nonce": nonce,
                 "openid": xmltodict.parse(xml)["xml"]["FromUserName"]}
        body = xml
        if self.mode != "plain":
            assert self.crypto is not None, "compatible and safe mode need an EncodingAESKey"
            sealed = xmltodict.parse(self.crypto.encrypt_message(xml, nonce, timestamp))["xml"]
            encrypt = sealed["Encrypt"]
            query |= {"encrypt_type": "aes", "msg_signature": sealed["MsgSignature"]}
            if self.mode == "safe":
                body = (f"<xml><ToUserName><![CDATA[{self.account}]]></ToUserName>"
                        f"<Encrypt><![CDATA[{encrypt}]]></Encrypt></xml>")
            else:  # compatible: the plain message with the ciphertext beside it
                body = xml.replace("</xml>", f"<Encrypt><![CDATA[{encrypt}]]></Encrypt></xml>")
        if bad_signature:
            query["signature"] = sign("not-the-token", timestamp, nonce)
            if "msg_signature" in query:
                query["msg_signature"] = sign("not-the-token", timestamp, nonce, "x")
        return query, body

    def read_reply(self, body: str) -> str:
        """The Content of a passive reply ("success" and "" as they are); encrypted replies are checked and opened."""
        if not body.startswith("<xml>"):
            return body
        outer = xmltodict.parse(body)["xml"]
        if "Encrypt" in outer:
            assert self.crypto is not None
            body = self.crypto.decrypt_message(body, outer["MsgSignature"], outer["TimeStamp"], outer["Nonce"])
            outer = xmltodict.parse(body)["xml"]
        assert outer["MsgType"] == "text" and outer["ToUserName"], body
        return outer["Content"]

    async def post(self, xml: str, *, timeout: float = 5.0, bad_signature: bool = False,
                   session: aiohttp.ClientSession | None = None, timestamp: int | None = None
                   ) -> tuple[int | None, str | None]:
        """One delivery: (status, reply) or (None, None) when no response came within `timeout`."""
        query, body = self.request(xml, bad_signature=bad_signature, timestamp=timestamp)
        own = session is None
        session = session or aiohttp.ClientSession()
        try:
            limit = aiohttp.ClientTimeout(total=timeout, ceil_threshold=1e9)  # exact: no rounding up to whole seconds
            async with session.post(self.url, params=query, data=body.encode(), timeout=limit) as r:
                text = await r.text()
                return r.status, (self.read_reply(text) if r.status == 200 else text)
        except (TimeoutError, aiohttp.ClientError):
            return None, None
        finally:
            if own:
                await session.close()

    async def deliver(self, xml: str, *, timeout: float = 5.0, spacing: float = 5.0, tries: int = 3,
                      until_reply: bool = True, t0: float | None = None) -> list[Delivery]:
        """Deliver one message like WeChat: re-send it when a delivery gets no reply within `timeout`, no sooner
        than (k-1)·spacing after the first, up to `tries` deliveries in all.

        With `until_reply=False` all `tries` deliveries are sent at (k-1)·spacing whatever the replies (duplicates,
        as across a network fault); they overlap when `spacing < timeout`.
        """
        loop = asyncio.get_running_loop()
        t0 = loop.time() if t0 is None else t0
        results: list[Delivery] = []

        async def one(n: int) -> Delivery:
            started = loop.time()
            status, reply = await self.post(xml, timeout=timeout)
            results.append(Delivery(n, started - t0, loop.time() - started, status, reply))
            return results[-1]

        tasks = []
        for k in range(tries):
            await asyncio.sleep(max(0.0, t0 + k * spacing - loop.time()))
            if until_reply:
                if (await one(k + 1)).status == 200:
                    break
            else:
                tasks.append(asyncio.create_task(one(k + 1)))
        await asyncio.gather(*tasks)
        return sorted(results, key=lambda d: d.n)
