"""A webhook receiver with Flask: verify the delivery, then handle its update.

    WEBHOOK_SECRET=... PORT=8080 python examples/webhook_flask.py
"""

from __future__ import annotations

import os

from flask import Flask, request

from botplatform import WebhookVerificationError, verify_webhook

SECRET = os.environ["WEBHOOK_SECRET"]  # the secret_token given to set_webhook
app = Flask(__name__)


@app.post("/webhook")
def webhook() -> tuple[dict[str, object], int]:
    try:
        # The raw bytes, as received: the signature covers them, not re-encoded JSON.
        update = verify_webhook(request.get_data(), request.headers, SECRET)
    except WebhookVerificationError as err:
        return {"error": err.reason}, 401
    print(f"flask: update {update.update_id}: {update.message.text if update.message else ''}", flush=True)
    return {"ok": True}, 200  # any 2xx: delivered; anything else is retried


if __name__ == "__main__":
    app.run(host="127.0.0.1", port=int(os.environ.get("PORT", "8080")))
