"""Registering and downloading files (CONTRACT §6).

Upload: the SHA-256 of the file is computed while it is read (a path is read twice, once to
hash and once to send; a stream is read once, into a spooled temporary file), then
upload-credentials is called with that checksum and a ``reuse_request_id`` that stays the
same across the retries of this one upload. The answer decides the rest: a trusted reuse is
done at once; a possession challenge is answered from the local bytes; otherwise the bytes
are streamed to the returned URL with the returned headers and the upload is completed.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import tempfile
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, Literal

import httpx

from ._transport import network_error
from .errors import BotPlatformError, UnexpectedResponseError, error_from_response
from .models import File, UploadCredentials

if TYPE_CHECKING:
    from .clients import AsyncBotClient, BotClient, Source

__all__ = ["UploadedFile", "async_download_file", "async_upload_file", "download_file", "upload_file"]

CHUNK = 64 * 1024
#: A stream larger than this is spooled to disk rather than kept in memory while it is uploaded.
SPOOL_IN_MEMORY = 8 * 1024 * 1024
#: The longest retry_after the upload waits out by itself (a possession lock-out is raised at once).
MAX_RETRY_WAIT = 60.0


@dataclass(frozen=True)
class UploadedFile:
    """A registered file, ready for ``send_photo`` / ``send_document``."""

    file_id: str
    file: File | None
    #: How the file was registered: its bytes were sent, or the service already had them.
    via: Literal["upload", "reuse", "possession"]
    #: Lowercase hex SHA-256 of the content.
    checksum: str
    size: int
    #: The id every attempt of this upload sent (pass it again to resume after a crash).
    reuse_request_id: str


class _Bytes:
    """The file's bytes, read as often as the flow needs (hash, possession ranges, upload)."""

    def __init__(self, source: Source) -> None:
        self._path: Path | None = None
        self._data: memoryview | None = None
        self._spool: IO[bytes] | None = None
        if isinstance(source, (bytes, bytearray, memoryview)):
            self._data = memoryview(source).cast("B")
        elif isinstance(source, (str, os.PathLike)):
            self._path = Path(source)
        elif hasattr(source, "read"):
            self._spool = tempfile.SpooledTemporaryFile(max_size=SPOOL_IN_MEMORY)
            self._stream: IO[bytes] | None = source
        else:
            raise TypeError("upload_file: give a path, bytes or a binary stream")
        self.checksum = ""
        self.size = 0

    def hash(self) -> None:
        """Reads the whole file once, computing its SHA-256 and size as it goes."""
        digest = hashlib.sha256()
        size = 0
        if self._spool is not None:
            stream = self._stream
            assert stream is not None
            while chunk := stream.read(CHUNK):
                if not isinstance(chunk, (bytes, bytearray)):
                    raise TypeError("upload_file: the stream must be opened in binary mode")
                digest.update(chunk)
                self._spool.write(chunk)
                size += len(chunk)
        else:
            for chunk in self.chunks():
                digest.update(chunk)
                size += len(chunk)
        self.checksum, self.size = digest.hexdigest(), size

    def chunks(self, offset: int = 0, length: int | None = None) -> Iterator[bytes]:
        end = None if length is None else offset + length
        if self._data is not None:
            data = self._data[offset:end]
            for i in range(0, len(data), CHUNK):
                yield bytes(data[i : i + CHUNK])
            return
        if self._path is not None:
            with self._path.open("rb") as f:
                yield from _read_range(f, offset, length)
            return
        assert self._spool is not None
        yield from _read_range(self._spool, offset, length)

    async def achunks(self) -> AsyncIterator[bytes]:
        for chunk in self.chunks():
            yield chunk

    def proof(self, nonce: str, ranges: list[tuple[int, int]]) -> str:
        """hex SHA-256(nonce bytes ‖ each range's bytes, in order)."""
        digest = hashlib.sha256(bytes.fromhex(nonce))
        for offset, length in ranges:
            for chunk in self.chunks(offset, length):
                digest.update(chunk)
        return digest.hexdigest()

    def close(self) -> None:
        if self._spool is not None:
            self._spool.close()


def _read_range(f: IO[bytes], offset: int, length: int | None) -> Iterator[bytes]:
    f.seek(offset)
    left = length
    while left is None or left > 0:
        chunk = f.read(CHUNK if left is None else min(CHUNK, left))
        if not chunk:
            return
        if left is not None:
            left -= len(chunk)
        yield chunk


def _file_name(source: Source, file_name: str | None) -> str:
    if file_name:
        return file_name
    if isinstance(source, (str, os.PathLike)):
        return Path(source).name
    name = getattr(source, "name", None)
    if isinstance(name, str) and name:
        return os.path.basename(name)
    raise TypeError("upload_file: file_name is required with bytes or a stream without a name")


def _challenge(creds: UploadCredentials) -> tuple[str, str, list[tuple[int, int]]]:
    c = creds.possession_challenge
    if c is None:
        raise UnexpectedResponseError("possessionRequired without a possessionChallenge", method="create_upload_credentials")
    return c.challenge_id, c.nonce, [(r.offset, r.length) for r in c.ranges or []]


def _upload_target(bot_base: str, creds: UploadCredentials) -> tuple[str, str, dict[str, str]]:
    if not creds.upload_url:
        raise UnexpectedResponseError("upload required but no uploadUrl", method="create_upload_credentials")
    url = creds.upload_url if "://" in creds.upload_url else bot_base + creds.upload_url
    return url, creds.method or "PUT", dict(creds.headers or {})


def _done(creds: UploadCredentials) -> bool:
    if creds.upload_required is False:
        if not creds.file_id:
            raise UnexpectedResponseError("uploadRequired false without a file_id", method="create_upload_credentials")
        return True
    return False


def _http_failed(response: httpx.Response, method: str) -> BotPlatformError:
    try:
        body: Any = response.json()
    except ValueError:
        body = None
    return error_from_response(response.status_code, body, response.headers.get("retry-after"), method)


def _retry_wait(err: BotPlatformError, attempt: int, attempts: int) -> float | None:
    if not err.retryable or attempt >= attempts:
        return None
    if err.retry_after is not None:
        return float(err.retry_after) if err.retry_after <= MAX_RETRY_WAIT else None
    return 0.25 * 2.0 ** (attempt - 1)


def upload_file(
    bot: BotClient,
    source: Source,
    *,
    file_name: str | None = None,
    file_type: str | None = None,
    reuse_request_id: str | None = None,
    attempts: int = 3,
) -> UploadedFile:
    """Uploads (or reuses) a file for this bot; retries the whole flow on failures that may pass."""
    data = _Bytes(source)
    try:
        name = _file_name(source, file_name)
        request_id = reuse_request_id or str(uuid.uuid4())
        data.hash()

        def once() -> UploadedFile:
            creds = bot.create_upload_credentials(
                file_name=name, file_size=data.size, checksum=data.checksum,
                file_type=file_type, reuse_request_id=request_id,
            )
            via: Literal["reuse", "possession"] = "reuse"
            if creds.possession_required or creds.possession_challenge:
                challenge_id, nonce, ranges = _challenge(creds)
                creds = bot.prove_possession(challenge_id=challenge_id, proof=data.proof(nonce, ranges))
                via = "possession"
            if _done(creds):
                assert creds.file_id
                return UploadedFile(creds.file_id, creds.file, via, data.checksum, data.size, request_id)
            url, method, headers = _upload_target(bot._transport.base_url, creds)
            headers["content-length"] = str(data.size)
            try:
                response = bot._transport.client.request(method, url, content=data.chunks(), headers=headers)
            except httpx.TransportError as exc:
                raise network_error(exc, "upload") from exc
            if not response.is_success:
                raise _http_failed(response, "upload")
            done = bot.complete_upload(checksum=data.checksum, reuse_request_id=request_id)
            return UploadedFile(done.file_id, done.file, "upload", data.checksum, data.size, request_id)

        attempt = 1
        while True:
            try:
                return once()
            except BotPlatformError as err:
                wait = _retry_wait(err, attempt, attempts)
                if wait is None:
                    raise
                time.sleep(wait)
                attempt += 1
    finally:
        data.close()


async def async_upload_file(
    bot: AsyncBotClient,
    source: Source,
    *,
    file_name: str | None = None,
    file_type: str | None = None,
    reuse_request_id: str | None = None,
    attempts: int = 3,
) -> UploadedFile:
    """The asyncio form of :func:`upload_file` (the file is hashed in a worker thread)."""
    data = _Bytes(source)
    try:
        name = _file_name(source, file_name)
        request_id = reuse_request_id or str(uuid.uuid4())
        await asyncio.to_thread(data.hash)

        async def once() -> UploadedFile:
            creds = await bot.create_upload_credentials(
                file_name=name, file_size=data.size, checksum=data.checksum,
                file_type=file_type, reuse_request_id=request_id,
            )
            via: Literal["reuse", "possession"] = "reuse"
            if creds.possession_required or creds.possession_challenge:
                challenge_id, nonce, ranges = _challenge(creds)
                proof = await asyncio.to_thread(data.proof, nonce, ranges)
                creds = await bot.prove_possession(challenge_id=challenge_id, proof=proof)
                via = "possession"
            if _done(creds):
                assert creds.file_id
                return UploadedFile(creds.file_id, creds.file, via, data.checksum, data.size, request_id)
            url, method, headers = _upload_target(bot._transport.base_url, creds)
            headers["content-length"] = str(data.size)
            try:
                response = await bot._transport.client.request(method, url, content=data.achunks(), headers=headers)
            except httpx.TransportError as exc:
                raise network_error(exc, "upload") from exc
            if not response.is_success:
                raise _http_failed(response, "upload")
            done = await bot.complete_upload(checksum=data.checksum, reuse_request_id=request_id)
            return UploadedFile(done.file_id, done.file, "upload", data.checksum, data.size, request_id)

        attempt = 1
        while True:
            try:
                return await once()
            except BotPlatformError as err:
                wait = _retry_wait(err, attempt, attempts)
                if wait is None:
                    raise
                await asyncio.sleep(wait)
                attempt += 1
    finally:
        data.close()


def _download_url(base: str, file: File) -> str:
    if not file.download_url:
        raise UnexpectedResponseError("getFile answered without a download_url", method="get_file")
    return file.download_url if "://" in file.download_url else base + file.download_url


def download_file(bot: BotClient, file_id: str, destination: str | os.PathLike[str] | IO[bytes]) -> File:
    """Streams a file's bytes (getFile, then its signed URL) to a path or a binary stream."""
    file = bot.get_file(file_id=file_id)
    url = _download_url(bot._transport.base_url, file)
    try:
        with bot._transport.client.stream("GET", url) as response:
            if not response.is_success:
                response.read()
                raise _http_failed(response, "download")
            if isinstance(destination, (str, os.PathLike)):
                with open(destination, "wb") as out:
                    for chunk in response.iter_bytes(CHUNK):
                        out.write(chunk)
            else:
                for chunk in response.iter_bytes(CHUNK):
                    destination.write(chunk)
    except httpx.TransportError as exc:
        raise network_error(exc, "download") from exc
    return file


async def async_download_file(
    bot: AsyncBotClient, file_id: str, destination: str | os.PathLike[str] | IO[bytes]
) -> File:
    """The asyncio form of :func:`download_file`."""
    file = await bot.get_file(file_id=file_id)
    url = _download_url(bot._transport.base_url, file)
    try:
        async with bot._transport.client.stream("GET", url) as response:
            if not response.is_success:
                await response.aread()
                raise _http_failed(response, "download")
            if isinstance(destination, (str, os.PathLike)):
                with open(destination, "wb") as out:
                    async for chunk in response.aiter_bytes(CHUNK):
                        out.write(chunk)
            else:
                async for chunk in response.aiter_bytes(CHUNK):
                    destination.write(chunk)
    except httpx.TransportError as exc:
        raise network_error(exc, "download") from exc
    return file

