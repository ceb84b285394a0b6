"""Sending one operation over HTTP (httpx), blocking or with asyncio, and reading its answer.

Retries: a 429 is sent again after its ``retry_after`` for every method (the service refused
it before doing anything); a connection that could not be made is tried again for every
method (nothing was sent); a lost answer (reset, read timeout) or a 502/503/504 only for
idempotent methods, where sending twice does no harm.
"""

from __future__ import annotations

import asyncio
import json
import random
import time
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any
from urllib.parse import quote

import httpx
from pydantic import BaseModel, TypeAdapter, ValidationError

from ._operation import Operation
from .errors import BotPlatformError, NetworkError, UnexpectedResponseError, error_from_response

__version__ = "0.1.0"

#: Default timeouts: 10 s to connect, 30 s for the rest (a long poll gets its own wait plus LONG_POLL_MARGIN).
DEFAULT_TIMEOUT = httpx.Timeout(30.0, connect=10.0)
#: Seconds a getUpdates read may take beyond the long-poll wait it asked the service for.
LONG_POLL_MARGIN = 15.0


@dataclass(frozen=True)
class RetryPolicy:
    """How a client retries on its own."""

    #: Further attempts after the first (0: never retry).
    retries: int = 3
    #: The longest ``retry_after`` waited out; a longer one is raised at once.
    max_retry_after: float = 60.0
    #: Backoff after a connection failure or a 5xx: first wait and cap, in seconds (with jitter).
    backoff: float = 0.5
    max_backoff: float = 8.0


@dataclass(frozen=True)
class PreparedRequest:
    method: str
    path: str
    query: tuple[tuple[str, str], ...]
    body: bytes | None
    read_timeout: float | None


def to_wire(value: Any) -> Any:
    """A parameter's JSON value: models by their wire names, only the fields that were set."""
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json", by_alias=True, exclude_unset=True)
    if isinstance(value, Mapping):
        return {str(k): to_wire(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [to_wire(v) for v in value]
    if isinstance(value, datetime):
        return (value if value.tzinfo else value.replace(tzinfo=timezone.utc)).isoformat()
    return value


def _query_value(value: Any) -> str:
    wire = to_wire(value)
    if isinstance(wire, bool):
        return "true" if wire else "false"
    return str(wire)


def prepare(op: Operation, params: dict[str, Any], timeout: httpx.Timeout) -> PreparedRequest:
    given = {k: v for k, v in params.items() if v is not None}
    path = op.path
    for name in op.path_params:
        value = given.pop(name, None)
        if value is None or value == "":
            raise TypeError(f"{op.name}: {name} is required")
        path = path.replace("{" + name + "}", quote(str(value), safe=""))
    query: list[tuple[str, str]] = []
    for name in op.query_params:
        value = given.pop(name, None)
        if value is None:
            continue
        for item in value if isinstance(value, (list, tuple)) else [value]:
            query.append((name, _query_value(item)))
    body: Any = None
    if op.body == "*":
        body = to_wire(given)
    elif op.body is not None:
        body = to_wire(given.get(op.body, {}))
    read_timeout = None
    if op.name == "get_updates":
        wait = params.get("timeout") or 0
        read_timeout = max(timeout.read or 0.0, float(wait) + LONG_POLL_MARGIN)
    encoded = None if body is None else json.dumps(body, separators=(",", ":"), ensure_ascii=False).encode()
    return PreparedRequest(op.http_method, path, tuple(query), encoded, read_timeout)


_adapters: dict[Any, TypeAdapter[Any]] = {}


def _adapter(result_type: Any) -> TypeAdapter[Any]:
    adapter = _adapters.get(result_type)
    if adapter is None:
        adapter = _adapters[result_type] = TypeAdapter(result_type)
    return adapter


def parse_answer(op: Operation, response: httpx.Response, result_type: Any) -> Any:
    """The result of a successful answer, or the error an unsuccessful one says."""
    try:
        body = response.json() if response.content else None
    except ValueError:
        body = None
    if not response.is_success:
        raise error_from_response(response.status_code, body, response.headers.get("retry-after"), op.name)
    if op.surface == "runtime":
        if not isinstance(body, dict) or body.get("ok") is not True or "result" not in body:
            raise UnexpectedResponseError(
                "the answer is not a runtime envelope", error_code=response.status_code, method=op.name
            )
        body = body["result"]
    try:
        return _adapter(result_type).validate_python(body)
    except ValidationError as exc:
        raise UnexpectedResponseError(
            f"the answer does not match the API: {exc.error_count()} problem(s), first at "
            f"{'.'.join(str(p) for p in exc.errors()[0]['loc'])}",
            error_code=response.status_code,
            method=op.name,
        ) from exc


# Failures before the request left: safe to retry for any method.
_NOT_SENT = (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout)


def network_error(exc: httpx.TransportError, method: str) -> NetworkError:
    kind = "timed out" if isinstance(exc, httpx.TimeoutException) else "failed"
    # The exception's text names no URL or header (a signed upload URL must not reach a log).
    return NetworkError(f"request {kind}: {type(exc).__name__}: {exc}", method=method)


def retry_wait(
    policy: RetryPolicy,
    op: Operation,
    attempt: int,
    error: BotPlatformError,
    exc: BaseException | None,
    retries: int | None = None,
) -> float | None:
    """Seconds to wait before attempt ``attempt + 1``, or None to raise ``error``."""
    if attempt >= (policy.retries if retries is None else retries):
        return None
    backoff = min(policy.max_backoff, policy.backoff * 2.0**attempt) * (0.5 + random.random() / 2)
    if error.error_code == 429:
        wait = float(error.retry_after if error.retry_after is not None else 1)
        return wait if wait <= policy.max_retry_after else None
    if error.error_code == 0:
        return backoff if isinstance(exc, _NOT_SENT) or op.idempotent else None
    if error.error_code in (502, 503, 504) and op.idempotent:
        return backoff
    return None


def _headers(credential: str, extra: Mapping[str, str], body: bytes | None) -> dict[str, str]:
    h = {"accept": "application/json", "user-agent": f"botplatform-python/{__version__}", **extra}
    h["authorization"] = f"Bearer {credential}"
    if body is not None:
        h["content-type"] = "application/json"
    return h


def _timeout(base: httpx.Timeout, read: float | None) -> httpx.Timeout:
    if read is None:
        return base
    return httpx.Timeout(connect=base.connect, read=read, write=base.write, pool=base.pool)


class SyncTransport:
    """Blocking calls over one httpx.Client (a connection pool)."""

    def __init__(
        self,
        credential: str,
        base_url: str,
        *,
        timeout: httpx.Timeout,
        policy: RetryPolicy,
        headers: Mapping[str, str] | None,
        http_client: httpx.Client | None,
    ) -> None:
        if not credential:
            raise ValueError("a credential (bot token or account JWT) is required")
        self.credential = credential
        self.base_url = base_url.rstrip("/")
        self.timeout = timeout
        self.policy = policy
        self.headers = dict(headers or {})
        self.client = http_client or httpx.Client(timeout=timeout, follow_redirects=False)
        self._owns_client = http_client is None

    def call(self, op: Operation, params: dict[str, Any], result_type: Any, *, retries: int | None = None) -> Any:
        req = prepare(op, params, self.timeout)
        attempt = 0
        while True:
            error: BotPlatformError
            exc: BaseException | None = None
            try:
                response = self.client.request(
                    req.method,
                    self.base_url + req.path,
                    params=req.query,
                    content=req.body,
                    headers=_headers(self.credential, self.headers, req.body),
                    timeout=_timeout(self.timeout, req.read_timeout),
                )
                return parse_answer(op, response, result_type)
            except httpx.TransportError as e:
                exc, error = e, network_error(e, op.name)
            except BotPlatformError as e:
                error = e
            wait = retry_wait(self.policy, op, attempt, error, exc, retries)
            if wait is None:
                if exc is not None:
                    raise error from exc
                raise error
            time.sleep(wait)
            attempt += 1

    def close(self) -> None:
        if self._owns_client:
            self.client.close()


class AsyncTransport:
    """Awaitable calls over one httpx.AsyncClient."""

    def __init__(
        self,
        credential: str,
        base_url: str,
        *,
        timeout: httpx.Timeout,
        policy: RetryPolicy,
        headers: Mapping[str, str] | None,
        http_client: httpx.AsyncClient | None,
    ) -> None:
        if not credential:
            raise ValueError("a credential (bot token or account JWT) is required")
        self.credential = credential
        self.base_url = base_url.rstrip("/")
        self.timeout = timeout
        self.policy = policy
        self.headers = dict(headers or {})
        self.client = http_client or httpx.AsyncClient(timeout=timeout, follow_redirects=False)
        self._owns_client = http_client is None

    async def call(
        self, op: Operation, params: dict[str, Any], result_type: Any, *, retries: int | None = None
    ) -> Any:
        req = prepare(op, params, self.timeout)
        attempt = 0
        while True:
            error: BotPlatformError
            exc: BaseException | None = None
            try:
                response = await self.client.request(
                    req.method,
                    self.base_url + req.path,
                    params=req.query,
                    content=req.body,
                    headers=_headers(self.credential, self.headers, req.body),
                    timeout=_timeout(self.timeout, req.read_timeout),
                )
                return parse_answer(op, response, result_type)
            except httpx.TransportError as e:
                exc, error = e, network_error(e, op.name)
            except BotPlatformError as e:
                error = e
            wait = retry_wait(self.policy, op, attempt, error, exc, retries)
            if wait is None:
                if exc is not None:
                    raise error from exc
                raise error
            await asyncio.sleep(wait)
            attempt += 1

    async def aclose(self) -> None:
        if self._owns_client:
            await self.client.aclose()
