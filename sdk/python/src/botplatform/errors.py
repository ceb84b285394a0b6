"""One exception hierarchy for every failed call, whichever surface answered.

The runtime API answers ``{"ok": false, "error_code", "description", "parameters": {"retry_after"}}``
and the console ``{"error": {"code", "status", "message", "details"}}``; both become a
:class:`BotPlatformError` subclass chosen by the HTTP status, so ``except TooManyRequestsError``
catches a 429 from either.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = [
    "BadRequestError",
    "BotPlatformError",
    "ConflictError",
    "ErrorDetail",
    "ForbiddenError",
    "NetworkError",
    "NotFoundError",
    "PayloadTooLargeError",
    "ServerError",
    "TooManyRequestsError",
    "UnauthorizedError",
    "UnexpectedResponseError",
]

# The runtime body names no gRPC status: the HTTP status decides one (CONTRACT §1).
_CODE_OF_HTTP = {
    400: "INVALID_ARGUMENT",
    401: "UNAUTHENTICATED",
    403: "PERMISSION_DENIED",
    404: "NOT_FOUND",
    # FAILED_PRECONDITION (webhook active) or ABORTED (a newer getUpdates): the description says which.
    409: "FAILED_PRECONDITION",
    413: "INVALID_ARGUMENT",
    429: "RESOURCE_EXHAUSTED",
    499: "CANCELLED",
    500: "INTERNAL",
    501: "UNIMPLEMENTED",
    502: "UNAVAILABLE",
    503: "UNAVAILABLE",
    504: "DEADLINE_EXCEEDED",
}


@dataclass(frozen=True)
class ErrorDetail:
    """A field the console refused, and why (``REQUIRED``, ``INVALID_FORMAT``, ``TOO_LONG``...)."""

    field: str
    reason: str


class BotPlatformError(Exception):
    """A call that failed: refused by the service, or never answered (``error_code`` 0)."""

    #: The HTTP status of the answer (as the runtime's ``error_code``); 0 when there was none.
    error_code: int
    #: The service's explanation, safe to show.
    description: str
    #: Seconds to wait before trying again (a 429), when the service said.
    retry_after: int | None
    #: The gRPC status name: ``INVALID_ARGUMENT``, ``RESOURCE_EXHAUSTED``, ``UNAVAILABLE``...
    code: str
    #: The fields at fault (console validation errors).
    details: list[ErrorDetail]
    #: The method called, ``"send_message"``.
    method: str | None

    def __init__(
        self,
        description: str,
        *,
        error_code: int = 0,
        code: str | None = None,
        retry_after: int | None = None,
        details: list[ErrorDetail] | None = None,
        method: str | None = None,
    ) -> None:
        super().__init__(description)
        self.description = description
        self.error_code = error_code
        self.code = code or _code_of_http(error_code)
        self.retry_after = retry_after
        self.details = details or []
        self.method = method

    def __str__(self) -> str:
        where = f" ({self.method})" if self.method else ""
        status = f"HTTP {self.error_code}" if self.error_code else "no answer"
        return f"{self.description} [{status}, {self.code}]{where}"

    @property
    def retryable(self) -> bool:
        """Whether the same call may succeed later: no answer, a 429, or a 5xx."""
        return self.error_code == 0 or self.error_code == 429 or self.error_code >= 500


class BadRequestError(BotPlatformError):
    """400: the request is wrong (a field out of range, a chat that never wrote to the bot...)."""


class PayloadTooLargeError(BadRequestError):
    """413: the body is larger than the service accepts."""


class UnauthorizedError(BotPlatformError):
    """401: no credential, or an invalid, expired or revoked one."""


class ForbiddenError(BotPlatformError):
    """403: the credential may not do this (an account JWT without the admin role, a missing scope)."""


class NotFoundError(BotPlatformError):
    """404: no such resource (or it belongs to someone else)."""


class ConflictError(BotPlatformError):
    """409: the resource is not in a state that allows the call (a webhook is set, a newer getUpdates)."""


class TooManyRequestsError(BotPlatformError):
    """429: a rate limit or the quota; ``retry_after`` says how many seconds to wait."""


class ServerError(BotPlatformError):
    """5xx: the service failed; the body never carries internals."""


class NetworkError(BotPlatformError):
    """No answer: the connection failed, was reset, or timed out."""


class UnexpectedResponseError(BotPlatformError):
    """An answer that is not the API's (a proxy's HTML page, a body of the wrong shape)."""


def _code_of_http(status: int) -> str:
    if status == 0:
        return "UNAVAILABLE"
    return _CODE_OF_HTTP.get(status, "INTERNAL" if status >= 500 else "UNKNOWN")


def _class_of(status: int) -> type[BotPlatformError]:
    if status == 413:
        return PayloadTooLargeError
    if status == 429:
        return TooManyRequestsError
    if status >= 500:
        return ServerError
    return {
        400: BadRequestError,
        401: UnauthorizedError,
        403: ForbiddenError,
        404: NotFoundError,
        409: ConflictError,
    }.get(status, BotPlatformError)


def error_from_response(
    status: int, body: Any, retry_after_header: str | None, method: str | None
) -> BotPlatformError:
    """Reads an error answer of either surface; ``body`` is the parsed JSON, or None."""
    header_retry = int(retry_after_header) if retry_after_header and retry_after_header.isdigit() else None
    cls = _class_of(status)
    if isinstance(body, dict) and body.get("ok") is False:
        params = body.get("parameters")
        retry = params.get("retry_after") if isinstance(params, dict) else None
        error_code = body.get("error_code")
        description = body.get("description")
        return cls(
            description if isinstance(description, str) else f"HTTP {status}",
            error_code=error_code if isinstance(error_code, int) else status,
            retry_after=retry if isinstance(retry, int) else header_retry,
            method=method,
        )
    if isinstance(body, dict) and isinstance(body.get("error"), dict):
        e = body["error"]
        details = [
            ErrorDetail(field=str(d.get("field", "")), reason=str(d.get("reason", "")))
            for d in e.get("details") or []
            if isinstance(d, dict)
        ]
        status_name = e.get("status")
        message = e.get("message")
        return cls(
            message if isinstance(message, str) else f"HTTP {status}",
            error_code=status,
            code=status_name if isinstance(status_name, str) else None,
            retry_after=header_retry,
            details=details,
            method=method,
        )
    return cls(f"HTTP {status}", error_code=status, retry_after=header_retry, method=method)
