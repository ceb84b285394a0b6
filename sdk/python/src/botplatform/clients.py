"""The clients: one per surface (runtime, console, admin), each blocking or with asyncio.

Their methods are generated from the OpenAPI document (``_generated/methods.py``); this module
only connects them to a transport and adds the file flow to the bot clients.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from types import TracebackType
from typing import IO, Any

import httpx

from ._generated.methods import (
    AdminMethods,
    AsyncAdminMethods,
    AsyncConsoleMethods,
    AsyncRuntimeMethods,
    ConsoleMethods,
    RuntimeMethods,
)
from ._operation import Operation
from ._transport import DEFAULT_TIMEOUT, AsyncTransport, RetryPolicy, SyncTransport
from .files import UploadedFile, async_download_file, async_upload_file, download_file, upload_file
from .models import File

__all__ = [
    "AdminClient",
    "AsyncAdminClient",
    "AsyncBotClient",
    "AsyncConsoleClient",
    "BotClient",
    "ConsoleClient",
]

Source = str | os.PathLike[str] | bytes | bytearray | memoryview | IO[bytes]


class _SyncClient:
    """What the blocking clients share: a transport, and ``with`` closing it."""

    def __init__(
        self,
        credential: str,
        *,
        base_url: str,
        timeout: httpx.Timeout | float = DEFAULT_TIMEOUT,
        retries: int = 3,
        max_retry_after: float = 60.0,
        headers: Mapping[str, str] | None = None,
        http_client: httpx.Client | None = None,
    ) -> None:
        self._transport = SyncTransport(
            credential,
            base_url,
            timeout=timeout if isinstance(timeout, httpx.Timeout) else httpx.Timeout(timeout),
            policy=RetryPolicy(retries=retries, max_retry_after=max_retry_after),
            headers=headers,
            http_client=http_client,
        )

    def _invoke(self, op: Operation, params: dict[str, Any], result: Any) -> Any:
        return self._transport.call(op, params, result)

    def close(self) -> None:
        """Closes the connection pool (unless it was given as ``http_client``)."""
        self._transport.close()

    def __enter__(self) -> Any:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()


class _AsyncClient:
    """What the asyncio clients share: a transport, and ``async with`` closing it."""

    def __init__(
        self,
        credential: str,
        *,
        base_url: str,
        timeout: httpx.Timeout | float = DEFAULT_TIMEOUT,
        retries: int = 3,
        max_retry_after: float = 60.0,
        headers: Mapping[str, str] | None = None,
        http_client: httpx.AsyncClient | None = None,
    ) -> None:
        self._transport = AsyncTransport(
            credential,
            base_url,
            timeout=timeout if isinstance(timeout, httpx.Timeout) else httpx.Timeout(timeout),
            policy=RetryPolicy(retries=retries, max_retry_after=max_retry_after),
            headers=headers,
            http_client=http_client,
        )

    async def _invoke(self, op: Operation, params: dict[str, Any], result: Any) -> Any:
        return await self._transport.call(op, params, result)

    async def aclose(self) -> None:
        """Closes the connection pool (unless it was given as ``http_client``)."""
        await self._transport.aclose()

    async def __aenter__(self) -> Any:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()


class BotClient(_SyncClient, RuntimeMethods):
    """The runtime API as a bot uses it, with its token (``sbot_...``).

    ``BotClient(token, base_url="http://127.0.0.1:8080").send_message(chat_id=1, text="hi")``.
    Each method returns the envelope's ``result`` as a model and raises a
    :class:`~botplatform.errors.BotPlatformError` subclass when the call fails.
    """

    def __enter__(self) -> BotClient:
        return self

    def upload_file(
        self,
        source: Source,
        *,
        file_name: str | None = None,
        file_type: str | None = None,
        reuse_request_id: str | None = None,
        attempts: int = 3,
    ) -> UploadedFile:
        """Registers a file (a path, bytes or a binary stream) and returns its ``file_id``.

        The SHA-256 is computed while reading; the service then answers with a trusted reuse,
        a possession challenge (answered from the local bytes) or an upload URL (the bytes are
        streamed to it). See :func:`botplatform.files.upload_file`.
        """
        return upload_file(
            self, source, file_name=file_name, file_type=file_type,
            reuse_request_id=reuse_request_id, attempts=attempts,
        )

    def download_file(self, file_id: str, destination: str | os.PathLike[str] | IO[bytes]) -> File:
        """Streams a file's bytes to a path or a binary stream; returns its metadata."""
        return download_file(self, file_id, destination)


class AsyncBotClient(_AsyncClient, AsyncRuntimeMethods):
    """The runtime API for asyncio: ``await bot.get_updates(timeout=30)``."""

    async def __aenter__(self) -> AsyncBotClient:
        return self

    async def upload_file(
        self,
        source: Source,
        *,
        file_name: str | None = None,
        file_type: str | None = None,
        reuse_request_id: str | None = None,
        attempts: int = 3,
    ) -> UploadedFile:
        """Registers a file; see :meth:`BotClient.upload_file`."""
        return await async_upload_file(
            self, source, file_name=file_name, file_type=file_type,
            reuse_request_id=reuse_request_id, attempts=attempts,
        )

    async def download_file(self, file_id: str, destination: str | os.PathLike[str] | IO[bytes]) -> File:
        """Streams a file's bytes to a path or a binary stream; returns its metadata."""
        return await async_download_file(self, file_id, destination)


class ConsoleClient(_SyncClient, ConsoleMethods):
    """The console API of one account (its JWT): create applications, read tokens, webhooks, deliveries."""

    def __enter__(self) -> ConsoleClient:
        return self


class AsyncConsoleClient(_AsyncClient, AsyncConsoleMethods):
    """The console API for asyncio."""

    async def __aenter__(self) -> AsyncConsoleClient:
        return self


class AdminClient(_SyncClient, AdminMethods):
    """The admin API (the review queue); the JWT needs the admin role."""

    def __enter__(self) -> AdminClient:
        return self


class AsyncAdminClient(_AsyncClient, AsyncAdminMethods):
    """The admin API for asyncio."""

    async def __aenter__(self) -> AsyncAdminClient:
        return self
