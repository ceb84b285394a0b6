"""Webhook verification: the checks one by one, a real signed delivery from the service to an
HTTPS receiver, and the aiohttp, FastAPI and Flask examples answering signed and forged posts."""

from __future__ import annotations

import http.server
import json
import os
import socket
import ssl
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest
from conftest import NewBot, Service

from botplatform import (
    ConsoleClient,

    WebhookBodyError,
    WebhookInvalidTimestampError,
    WebhookMissingHeaderError,
    WebhookSignatureError,
    WebhookTimestampError,
    WebhookUpdateIdMismatchError,
    sign_webhook,
    verify_webhook,
)

SECRET = "s3cret-s3cret-s3cret"
BODY = json.dumps({"update_id": 42, "update_seq": 7, "message": {"message_id": 1, "date": 1, "text": "hi"}}).encode()
NOW = 1_800_000_000


def signed(body: bytes = BODY, *, secret: str = SECRET, ts: int = NOW, update_id: str = "42") -> dict[str, str]:
    return {
        "X-Service-Timestamp": str(ts),
        "X-Service-Signature-V2": sign_webhook(secret, ts, body),
        "X-Service-Update-Id": update_id,
        "Content-Type": "application/json",
    }


def test_a_signed_delivery_is_verified_and_parsed() -> None:
    update = verify_webhook(BODY, signed(), SECRET, now=NOW)
    assert update.update_id == 42 and update.message and update.message.text == "hi"
    # Header names in any case, as lists of pairs too.
    assert verify_webhook(BODY, list(signed().items()), SECRET, now=NOW + 300).update_seq == 7


def test_each_check_fails_with_its_own_error() -> None:
    with pytest.raises(WebhookSignatureError):
        verify_webhook(BODY + b" ", signed(), SECRET, now=NOW)
    with pytest.raises(WebhookSignatureError):
        verify_webhook(BODY, signed(secret="another"), SECRET, now=NOW)
    with pytest.raises(WebhookSignatureError):
        verify_webhook(BODY, {**signed(), "X-Service-Signature-V2": "zz" * 32}, SECRET, now=NOW)
    with pytest.raises(WebhookTimestampError) as old:
        verify_webhook(BODY, signed(), SECRET, now=NOW + 301)
    assert old.value.reason == "timestamp_out_of_tolerance" and "301 s old" in str(old.value)
    with pytest.raises(WebhookTimestampError):
        verify_webhook(BODY, signed(), SECRET, now=NOW - 301)
    assert verify_webhook(BODY, signed(), SECRET, now=NOW + 600, tolerance=600).update_id == 42
    with pytest.raises(WebhookInvalidTimestampError):
        verify_webhook(BODY, {**signed(), "X-Service-Timestamp": "soon"}, SECRET, now=NOW)
    headers = signed()
    del headers["X-Service-Signature-V2"]
    with pytest.raises(WebhookMissingHeaderError) as missing:
        verify_webhook(BODY, headers, SECRET, now=NOW)
    assert missing.value.reason == "missing_header"
    with pytest.raises(WebhookUpdateIdMismatchError):
        verify_webhook(BODY, signed(update_id="43"), SECRET, now=NOW)
    not_update = b'{"hello": 1}'
    with pytest.raises(WebhookBodyError):
        verify_webhook(not_update, signed(not_update), SECRET, now=NOW)
    with pytest.raises(TypeError, match="raw body bytes"):
        verify_webhook(BODY.decode(), signed(), SECRET, now=NOW)  # type: ignore[arg-type]


def test_secret_rotation_several_signatures_and_several_secrets() -> None:
    old, new = sign_webhook("old-secret", NOW, BODY), sign_webhook("new-secret", NOW, BODY)
    for value in (f"{old},{new}", f"{new} {old}", f"{old}, {new}"):
        headers = {**signed(), "X-Service-Signature-V2": value}
        assert verify_webhook(BODY, headers, "new-secret", now=NOW).update_id == 42
        assert verify_webhook(BODY, headers, "old-secret", now=NOW).update_id == 42
    # The receiver holding both secrets accepts a delivery signed with either.
    assert verify_webhook(BODY, signed(secret="old-secret"), ["new-secret", "old-secret"], now=NOW).update_id == 42
    with pytest.raises(WebhookSignatureError):
        verify_webhook(BODY, {**signed(), "X-Service-Signature-V2": f"{old},{new}"}, "third", now=NOW)


@pytest.fixture
def https_receiver(service: Service) -> Iterator[tuple[str, list[tuple[bytes, dict[str, str]]]]]:
    got: list[tuple[bytes, dict[str, str]]] = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802
            body = self.rfile.read(int(self.headers["content-length"]))
            got.append((body, dict(self.headers.items())))
            self.send_response(200)
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ctx.load_cert_chain(service.tls_cert, service.tls_key)
    server.socket = ctx.wrap_socket(server.socket, server_side=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"https://127.0.0.1:{server.server_address[1]}/hook", got
    server.shutdown()


def test_a_real_delivery_from_the_service_verifies(
    make_bot: Callable[[str], NewBot], console: ConsoleClient, https_receiver: tuple[str, list[tuple[bytes, dict[str, str]]]]
) -> None:
    url, got = https_receiver
    b = make_bot("webhook_live")
    secret = "live-secret-live-secret-0123"
    assert b.bot.set_webhook(url=url, secret_token=secret)
    sent = console.create_test_update(b.id, text="delivered", chat_id=6100)
    deadline = time.monotonic() + 15
    while not got and time.monotonic() < deadline:
        time.sleep(0.05)
    body, headers = got[0]
    update = verify_webhook(body, headers, secret)
    assert update.update_id == sent.update_id and update.message and update.message.text == "delivered"
    with pytest.raises(WebhookSignatureError):
        verify_webhook(body, headers, "not-the-secret")


EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.parametrize("framework", ["aiohttp", "fastapi", "flask"])
def test_the_framework_examples_accept_signed_deliveries_and_refuse_forged_ones(framework: str) -> None:
    port = free_port()
    env = {**os.environ, "WEBHOOK_SECRET": SECRET, "PORT": str(port),
           "PYTHONPATH": os.pathsep.join([str(EXAMPLES.parent / "src"), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.Popen([sys.executable, str(EXAMPLES / f"webhook_{framework}.py")], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        url = f"http://127.0.0.1:{port}/webhook"
        deadline = time.monotonic() + 20
        while True:
            try:
                httpx.get(f"http://127.0.0.1:{port}/", timeout=1)
                break
            except httpx.TransportError:
                assert time.monotonic() < deadline and proc.poll() is None, "the example did not start"
                time.sleep(0.1)
        now = int(time.time())
        ok = httpx.post(url, content=BODY, headers=signed(ts=now))
        assert ok.status_code == 200
        forged = httpx.post(url, content=BODY, headers=signed(ts=now, secret="guess"))
        assert forged.status_code == 401 and "invalid_signature" in forged.text
        stale = httpx.post(url, content=BODY, headers=signed(ts=now - 3600))
        assert stale.status_code == 401
    finally:
        proc.terminate()
        out, _ = proc.communicate(timeout=10)
    assert f"{framework}: update 42: hi" in out
    assert out.count("update 42") == 1




def test_a_rotated_secret_both_signatures_verify_during_the_overlap(
    make_bot: Callable[[str], NewBot], console: ConsoleClient, https_receiver: tuple[str, list[tuple[bytes, dict[str, str]]]]
) -> None:
    url, got = https_receiver
    b = make_bot("webhook_rotation")
    old = "old-secret-old-secret-old-secret"
    assert b.bot.set_webhook(url=url, secret_token=old)
    rotated = console.rotate_webhook_secret(b.id, overlap_seconds=3600)
    new = rotated.secret_token
    assert new and new != old
    sent = console.create_test_update(b.id, text="during the overlap", chat_id=6200)
    deadline = time.monotonic() + 15
    while not got and time.monotonic() < deadline:
        time.sleep(0.05)
    body, headers = got[0]
    signatures = {k.lower(): v for k, v in headers.items()}["x-service-signature-v2"].split(" ")
    assert len(signatures) == 2
    # A receiver still on the old secret and one already on the new accept it alike.
    assert verify_webhook(body, headers, old).update_id == sent.update_id
    assert verify_webhook(body, headers, new).update_id == sent.update_id
    assert verify_webhook(body, headers, [new, old]).update_id == sent.update_id
    with pytest.raises(WebhookSignatureError):
        verify_webhook(body, headers, "neither-secret")
