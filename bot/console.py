"""The terminal channel: the embedded default when no platform is configured.

On a terminal it prompts; with piped input it prints plain answers, no prompts or colours, and exits at the end of
input, so `echo 咖啡锈病怎么防治 | make run` works. History is kept in the same SQLite store the bots use; each run
of the console is a new conversation (earlier answers' citations still open with /source). No rate limit here.
"""
from __future__ import annotations

import asyncio
import sys

from rag_core.config import Config

from .service import ChatService, Incoming, Reply

PROMPT = "问> "


def render_console(reply: Reply) -> str:
    lines = [reply.body.text]
    if reply.body.footnotes:
        lines.append("来源：")
        lines += [f"[{f.n}] {f.label}  （/source {f.id}）" for f in reply.body.footnotes]
    return "\n".join(lines)


async def console_loop(service: ChatService, stdin=None, stdout=None, chat_id: str = "local") -> None:
    stdin = stdin or sys.stdin
    stdout = stdout or sys.stdout
    if hasattr(stdin, "reconfigure"):  # bytes that are not valid text become U+FFFD instead of ending the session
        stdin.reconfigure(errors="replace")
    interactive = stdin.isatty() and stdout.isatty()
    await service.start_session("console", chat_id)
    if interactive:
        stdout.write("云南小粒咖啡种植顾问（输入 /help 查看帮助，Ctrl-D 退出）\n")
    while True:
        if interactive:
            stdout.write(PROMPT)
            stdout.flush()
        line = await asyncio.to_thread(stdin.readline)
        if not line:
            break
        text = line.strip()
        if not text:
            continue
        if text in ("/quit", "/exit"):
            break
        reply = await service.handle(Incoming("console", chat_id, "console", text))
        stdout.write(render_console(reply) + "\n\n")
        stdout.flush()


def run_console(cfg: Config, args) -> int:
    from .app import open_service

    async def main() -> None:
        service, close = await open_service(cfg, args, console_admin=True)
        try:
            await console_loop(service)
        finally:
            await close()

    asyncio.run(main())
    return 0
