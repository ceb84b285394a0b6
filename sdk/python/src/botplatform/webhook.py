"""Verifying a webhook delivery (CONTRACT §5), exactly as the TypeScript SDK does.

The signature is the lowercase hex HMAC-SHA256, under the bot's ``secret_token``, of
``timestamp + "." + raw body``; it is compared in constant time, the timestamp must be within
300 seconds of now either way, and ``X-Service-Update-Id`` must equal the body's
``update_id``. Check the bytes as received, before any JSON parsing: re-serialised JSON would
not match.

Secret rotation: the header may carry several signatures (separated by commas or spaces, one
per secret in use while a secret rotates), and ``secret`` may be several secrets (the old and
the new one, on the receiving side); a delivery passes when any signature matches any secret.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import re
import time
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Literal

from pydantic import ValidationError

from .models import Update

__all__ = [
    "DEFAULT_TOLERANCE_SECONDS",
    "SIGNATURE_HEADER",
    "TIMESTAMP_HEADER",
    "UPDATE_ID_HEADER",
    "WebhookBodyError",
    "WebhookInvalidTimestampError",
    "WebhookMissingHeaderError",
    "WebhookSignatureError",
    "WebhookTimestampError",
    "WebhookUpdateIdMismatchError",
    "WebhookVerificationError",
    "sign_webhook",
    "verify_webhook",
]

SIGNATURE_HEADER = "x-service-signature-v2"
TIMESTAMP_HEADER = "x-service-timestamp"
UPDATE_ID_HEADER = "x-service-update-id"
#: Clock skew tolerated, either way, in seconds.
DEFAULT_TOLERANCE_SECONDS = 300

WebhookFailure = Literal[
    "missing_header",
    "invalid_timestamp",
    "timestamp_out_of_tolerance",
    "invalid_signature",
    "invalid_body",
    "update_id_mismatch",
]

_HEX64 = re.compile(r"[0-9a-fA-F]{64}")
_TIMESTAMP = re.compile(r"\d{1,12}")
_SEPARATORS = re.compile(r"[\s,]+")


class WebhookVerificationError(Exception):
    """A delivery that must not be trusted; ``reason`` says which check failed. Answer it 401."""

    def __init__(self, reason: WebhookFailure, message: str) -> None:
        super().__init__(message)
        self.reason: WebhookFailure = reason


class WebhookMissingHeaderError(WebhookVerificationError):
    """A timestamp or update id header is absent or given twice, or the signature header is absent."""

    def __init__(self, header: str) -> None:
        super().__init__("missing_header", f"missing or repeated header {header}")
        self.header = header


class WebhookInvalidTimestampError(WebhookVerificationError):
    """X-Service-Timestamp is not unix seconds."""

    def __init__(self) -> None:
        super().__init__("invalid_timestamp", f"{TIMESTAMP_HEADER} is not a unix time in seconds")


class WebhookTimestampError(WebhookVerificationError):
    """The timestamp is further from now than the tolerance: a replay, or a wrong clock."""

    def __init__(self, timestamp: int, now: int, tolerance: int) -> None:
        way = "old" if timestamp < now else "ahead"
        super().__init__(
            "timestamp_out_of_tolerance",
            f"timestamp is {abs(now - timestamp)} s {way}; at most {tolerance} s is tolerated",
        )
        self.timestamp, self.now, self.tolerance = timestamp, now, tolerance


class WebhookSignatureError(WebhookVerificationError):
    """No signature matches: a changed body or timestamp, or another secret."""

    def __init__(self) -> None:
        super().__init__("invalid_signature", "signature does not match the body, the timestamp and the secret")


class WebhookBodyError(WebhookVerificationError):
    """Signed correctly, but not an update (cannot happen with the service; kept for safety)."""

    def __init__(self, detail: str) -> None:
        super().__init__("invalid_body", f"body is not an update: {detail}")


class WebhookUpdateIdMismatchError(WebhookVerificationError):
    """X-Service-Update-Id names another update than the body."""

    def __init__(self, header_update_id: str, body_update_id: str) -> None:
        super().__init__(
            "update_id_mismatch",
            f"{UPDATE_ID_HEADER} {header_update_id} does not match the body's update_id {body_update_id}",
        )
        self.header_update_id, self.body_update_id = header_update_id, body_update_id


def sign_webhook(secret: str, timestamp: int | str, body: bytes) -> str:
    """The lowercase hex signature the service sends: HMAC-SHA256(secret, timestamp + "." + body)."""
    return hmac.new(secret.encode(), f"{timestamp}.".encode() + body, hashlib.sha256).hexdigest()


def _values(headers: Any, name: str) -> list[str]:
    """Every value of a header, whatever the framework's header object (or a plain mapping)."""
    for getter in ("getall", "get_all", "getlist", "get_list"):
        fn = getattr(headers, getter, None)
        if callable(fn):
            try:
                got = fn(name, [])
            except TypeError:
                got = fn(name)
            return [str(v) for v in (got or [])]
    if isinstance(headers, Mapping):
        items: Iterable[tuple[Any, Any]] = headers.items()
    else:
        items = headers
    out: list[str] = []
    for key, value in items:
        if str(key).lower() == name:
            out.extend(str(v) for v in value) if isinstance(value, (list, tuple)) else out.append(str(value))
    return out


def _single(headers: Any, name: str) -> str:
    values = _values(headers, name)
    if len(values) != 1 or not values[0] or "," in values[0]:
        raise WebhookMissingHeaderError(name)
    return values[0].strip()


def verify_webhook(
    body: bytes,
    headers: Mapping[str, str] | Iterable[tuple[str, str]] | Any,
    secret: str | Sequence[str],
    *,
    tolerance: int = DEFAULT_TOLERANCE_SECONDS,
    now: int | None = None,
) -> Update:
    """Verifies one delivery and returns its update, or raises a :class:`WebhookVerificationError`.

    ``body`` is the request body as received (``bytes``; a str or a parsed object is refused).
    ``headers`` is the request's headers: a dict, a list of pairs, or a framework's header
    object (aiohttp, Starlette/FastAPI, Flask/Werkzeug). ``secret`` is the bot's webhook
    secret, or several during a rotation.
    """
    if not isinstance(body, (bytes, bytearray, memoryview)):
        raise TypeError("verify_webhook needs the raw body bytes, not parsed or re-encoded JSON")
    body = bytes(body)
    secrets = [secret] if isinstance(secret, str) else list(secret)
    if not secrets or not all(isinstance(s, str) and s for s in secrets):
        raise TypeError("verify_webhook needs the webhook secret")

    signature_values = _values(headers, SIGNATURE_HEADER)
    if not signature_values or not any(v.strip() for v in signature_values):
        raise WebhookMissingHeaderError(SIGNATURE_HEADER)
    ts_text = _single(headers, TIMESTAMP_HEADER)
    update_id_header = _single(headers, UPDATE_ID_HEADER)
    if not _TIMESTAMP.fullmatch(ts_text):
        raise WebhookInvalidTimestampError()

    given = [s for v in signature_values for s in _SEPARATORS.split(v.strip()) if s]
    matched = False
    for s in secrets:
        expected = sign_webhook(s, ts_text, body).encode()
        for candidate in given:
            # Every pair is compared, in constant time, whatever matched before; a malformed
            # candidate is compared too (against itself padded) and then fails.
            well_formed = bool(_HEX64.fullmatch(candidate))
            value = candidate.lower().encode() if well_formed else b"0" * 64
            matched |= hmac.compare_digest(expected, value) and well_formed
    if not matched:
        raise WebhookSignatureError()

    timestamp = int(ts_text)
    current = int(time.time()) if now is None else now
    if abs(current - timestamp) > tolerance:
        raise WebhookTimestampError(timestamp, current, tolerance)

    try:
        parsed = json.loads(body)
    except ValueError:
        raise WebhookBodyError("not JSON") from None
    update_id = parsed.get("update_id") if isinstance(parsed, dict) else None
    if not isinstance(update_id, int) or isinstance(update_id, bool):
        raise WebhookBodyError("no update_id")
    if update_id_header != str(update_id):
        raise WebhookUpdateIdMismatchError(update_id_header, str(update_id))
    try:
        return Update.model_validate(parsed)
    except ValidationError as exc:
        raise WebhookBodyError(f"{exc.error_count()} field(s) do not match the API") from None
