"""A webhook receiver with aiohttp: verify the delivery, then handle its update.

    WEBHOOK_SECRET=... PORT=8080 python examples/webhook_aiohttp.py
"""

from __future__ import annotations

import os

from aiohttp import web

from botplatform import WebhookVerificationError, verify_webhook

SECRET = os.environ["WEBHOOK_SECRET"]  # the secret_token given to set_webhook


async def webhook(request: web.Request) -> web.Response:
    try:
        # The raw bytes, as received: the signature covers them, not re-encoded JSON.
        update = verify_webhook(await request.read(), request.headers, SECRET)
    except WebhookVerificationError as err:
        return web.json_response({"error": err.reason}, status=401)
    print(f"aiohttp: update {update.update_id}: {update.message.text if update.message else ''}", flush=True)
    return web.Response(status=200)  # any 2xx: delivered; anything else is retried


app = web.Application()
app.router.add_post("/webhook", webhook)

if __name__ == "__main__":
    web.run_app(app, host="127.0.0.1", port=int(os.environ.get("PORT", "8080")), print=None)
