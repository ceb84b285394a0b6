"""The issue's check, written from README.md alone and run in a fresh virtual environment with
only the built wheel installed: create, approve, poll and answer three updates, upload a file
and reuse it, verify a signed webhook delivery, catch a typed 429. Prints a JSON summary.

Environment: BASE_URL, ACCOUNT_JWT, ADMIN_JWT, TLS_CERT and TLS_KEY (a certificate the
service trusts for webhooks), USERNAME.
"""

from __future__ import annotations

import http.server
import json
import os
import ssl
import threading
import time

from botplatform import (
    AdminClient,
    BotClient,
    ConsoleClient,
    Poller,
    TooManyRequestsError,
    Update,
    verify_webhook,
)

BASE = os.environ["BASE_URL"]
summary: dict[str, object] = {}

dev = ConsoleClient(os.environ["ACCOUNT_JWT"], base_url=BASE)
admin = AdminClient(os.environ["ADMIN_JWT"], base_url=BASE)

# Create and approve; the token is shown once.
app = dev.create_application(name="Readme", username=os.environ["USERNAME"])
admin.approve_bot(app.id)
token = dev.get_my_bot(app.id).one_time_token
assert token
summary["created"] = {"id": app.id, "review_status": app.review_status}

with BotClient(token, base_url=BASE) as bot:
    summary["get_me"] = bot.get_me().username

    # Poll and answer three updates.
    for i in range(3):
        dev.create_test_update(app.id, text=f"hello {i}", chat_id=100 + i)
    answered: list[dict[str, object]] = []

    def echo(update: Update) -> None:
        if update.message and update.message.chat and update.message.text:
            sent = bot.send_message(chat_id=update.message.chat.id, text=update.message.text)
            answered.append({"update_seq": update.update_seq, "chat_id": update.message.chat.id, "text": sent.text})
        if len(answered) == 3:
            poller.stop()

    bot.delete_webhook()
    poller = Poller(bot, echo, timeout=30)
    poller.run()
    summary["answered"] = answered
    summary["confirmed"] = bot.get_updates(timeout=0) == []

    # Upload a file, then the same bytes again: reused, not uploaded.
    data = os.urandom(100_000)
    first = bot.upload_file(data, file_name="first.bin")
    second = bot.upload_file(data, file_name="second.bin")
    sent_doc = bot.send_document(chat_id=100, file_id=second.file_id)
    summary["files"] = {"first": first.via, "second": second.via, "same_checksum": first.checksum == second.checksum,
                        "sent": sent_doc.document is not None}

    # A signed webhook delivery, received over HTTPS and verified.
    secret = "readme-walk-secret-0123456789"
    received: list[tuple[bytes, dict[str, str]]] = []

    class Receiver(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802
            received.append((self.rfile.read(int(self.headers["content-length"])), dict(self.headers.items())))
            self.send_response(200)
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.HTTPServer(("127.0.0.1", 0), Receiver)
    tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    tls.load_cert_chain(os.environ["TLS_CERT"], os.environ["TLS_KEY"])
    server.socket = tls.wrap_socket(server.socket, server_side=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    bot.set_webhook(url=f"https://127.0.0.1:{server.server_address[1]}/webhook", secret_token=secret)
    pushed = dev.create_test_update(app.id, text="by webhook", chat_id=100)
    deadline = time.monotonic() + 15
    while not received and time.monotonic() < deadline:
        time.sleep(0.05)
    body, headers = received[0]
    update = verify_webhook(body, headers, secret)
    summary["webhook"] = {"verified_update_id": update.update_id, "expected": pushed.update_id,
                          "text": update.message.text if update.message else None}
    server.shutdown()

# A typed 429: more sends to one chat than its limit allows, without retries.
with BotClient(token, base_url=BASE, retries=0) as impatient:
    try:
        for i in range(50):
            impatient.send_message(chat_id=101, text=f"burst {i}")
        summary["rate_limited"] = None
    except TooManyRequestsError as e:
        summary["rate_limited"] = {"error_code": e.error_code, "retry_after": e.retry_after, "description": e.description}

print(json.dumps(summary))
