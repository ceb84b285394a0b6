"""A webhook receiver with FastAPI: verify the delivery, then handle its update.

    WEBHOOK_SECRET=... PORT=8080 python examples/webhook_fastapi.py   (or: uvicorn webhook_fastapi:app)
"""

from __future__ import annotations

import os

import uvicorn
from fastapi import FastAPI, HTTPException, Request

from botplatform import WebhookVerificationError, verify_webhook

SECRET = os.environ["WEBHOOK_SECRET"]  # the secret_token given to set_webhook
app = FastAPI()


@app.post("/webhook")
async def webhook(request: Request) -> dict[str, bool]:
    try:
        # The raw bytes, as received: the signature covers them, not re-encoded JSON.
        update = verify_webhook(await request.body(), request.headers, SECRET)
    except WebhookVerificationError as err:
        raise HTTPException(status_code=401, detail=err.reason) from None
    print(f"fastapi: update {update.update_id}: {update.message.text if update.message else ''}", flush=True)
    return {"ok": True}  # any 2xx: delivered; anything else is retried


if __name__ == "__main__":
    uvicorn.run(app, host="127.0.0.1", port=int(os.environ.get("PORT", "8080")), log_level="warning")
