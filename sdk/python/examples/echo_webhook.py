"""Echo bot by webhook (aiohttp, asyncio): an HTTPS server that verifies each delivery and answers it.

    BOT_TOKEN=sbot_... TLS_CERT=cert.pem TLS_KEY=key.pem python examples/echo_webhook.py

It listens on HOST:PORT (default 127.0.0.1:8443) and registers WEBHOOK_URL (default
https://HOST:PORT/webhook) with set_webhook and a secret (WEBHOOK_SECRET, or a random one).
Without TLS_CERT/TLS_KEY it serves plain HTTP, for running behind a TLS-terminating proxy;
WEBHOOK_URL must then be the proxy's public https URL. The service refuses webhooks to
loopback unless started with WEBHOOK_ALLOWED_CIDRS=127.0.0.0/8, and trusts a self-signed
certificate only when WEBHOOK_CA_FILE names it (see docs/sdk.md).
"""

from __future__ import annotations

import asyncio
import os
import secrets
import signal
import ssl
import sys

from _settings import bot_settings, log
from aiohttp import web

from botplatform import AsyncBotClient, WebhookVerificationError, verify_webhook

NAME = "echo-webhook"


async def main() -> None:
    token, base_url = bot_settings(NAME)
    host = os.environ.get("HOST", "127.0.0.1")
    port = int(os.environ.get("PORT", "8443"))
    cert, key = os.environ.get("TLS_CERT"), os.environ.get("TLS_KEY")
    tls: ssl.SSLContext | None = None
    if cert and key:
        tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        tls.load_cert_chain(cert, key)
    url = os.environ.get("WEBHOOK_URL") or (f"https://{host}:{port}/webhook" if tls else None)
    if not url:
        print(f"{NAME}: set TLS_CERT and TLS_KEY, or WEBHOOK_URL (the public https URL of a proxy in front of this server)",
              file=sys.stderr)
        raise SystemExit(2)
    secret = os.environ.get("WEBHOOK_SECRET") or secrets.token_urlsafe(24)

    async with AsyncBotClient(token, base_url=base_url) as bot:

        async def receive(request: web.Request) -> web.Response:
            try:
                update = verify_webhook(await request.read(), request.headers, secret)
            except WebhookVerificationError as err:
                log(NAME, f"refused a delivery: {err}")
                return web.Response(status=401)
            message = update.message
            if message is not None and message.chat is not None and message.text is not None:
                chat_id = message.chat.id
                log(NAME, f"update {update.update_id} (seq {update.update_seq}) from chat {chat_id}: {message.text}")
                try:
                    sent = await bot.send_message(chat_id=chat_id, text=message.text,
                                                  reply_to_message_id=message.message_id)
                except Exception as err:  # answer 500: the service delivers the update again
                    log(NAME, f"update {update.update_id} failed (the service will retry): {err}")
                    return web.Response(status=500)
                log(NAME, f"replied with message {sent.message_id} in chat {chat_id}")
            return web.Response(status=200)

        app = web.Application()
        app.router.add_post("/webhook", receive)
        runner = web.AppRunner(app)
        await runner.setup()
        await web.TCPSite(runner, host, port, ssl_context=tls).start()

        me = await bot.get_me()
        await bot.set_webhook(url=url, secret_token=secret)
        log(NAME, f"@{me.username} receives by webhook at {url} (listening on {host}:{port})")

        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        await stop.wait()
        # The webhook stays set: the service keeps (and retries) deliveries until the bot is back.
        await runner.cleanup()
        log(NAME, "stopped")


if __name__ == "__main__":
    asyncio.run(main())
