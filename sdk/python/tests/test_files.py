"""The file flow against the running service: upload from a path, bytes and a stream, a trusted
reuse, a possession challenge answered from the local bytes, a lock-out raised at once, the
download, and the asyncio form."""

from __future__ import annotations

import asyncio
import hashlib
import io
import json
import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from conftest import NewBot, Proxy, Service, approved

from botplatform import AdminClient, AsyncBotClient, BadRequestError, BotClient, ConsoleClient, TooManyRequestsError


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


class OneWayStream(io.RawIOBase):
    """A stream that can only be read forwards, once (like a pipe or a socket)."""

    def __init__(self, data: bytes) -> None:
        self._data = io.BytesIO(data)

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: bytearray | memoryview) -> int:  # type: ignore[override]
        chunk = self._data.read(len(buffer))
        buffer[: len(chunk)] = chunk
        return len(chunk)

    def seekable(self) -> bool:
        return False


@pytest.fixture
def other_account(service: Service, admin: AdminClient) -> Iterator[Callable[[str], NewBot]]:
    with ConsoleClient(service.other_jwt, base_url=service.base_url) as other:
        yield lambda name: approved(other, admin, service.base_url, name)


def test_upload_from_a_path_send_it_and_download_it(make_bot: Callable[[str], NewBot], console: ConsoleClient, tmp_path: Path) -> None:
    b = make_bot("files_path")
    data = os.urandom(3 * 1024 * 1024 + 17)
    path = tmp_path / "report.bin"
    path.write_bytes(data)
    up = b.bot.upload_file(path, file_type="application/octet-stream")
    assert (up.via, up.checksum, up.size) == ("upload", sha(data), len(data))
    assert up.file and (up.file.file_name, up.file.file_size) == ("report.bin", len(data))

    console.create_test_update(b.id, text="send me the report", chat_id=7100)
    sent = b.bot.send_document(chat_id=7100, file_id=up.file_id, caption="here")
    assert sent.document and sent.document.file_id == up.file_id and sent.caption == "here"

    out = tmp_path / "back.bin"
    meta = b.bot.download_file(up.file_id, out)
    assert out.read_bytes() == data and meta.checksum == sha(data) and meta.download_url


def test_bytes_and_streams_and_a_trusted_reuse(make_bot: Callable[[str], NewBot]) -> None:
    b = make_bot("files_reuse")
    data = os.urandom(40_000)
    first = b.bot.upload_file(data, file_name="a.png", file_type="image/png")
    second = b.bot.upload_file(io.BufferedReader(OneWayStream(data)), file_name="b.png", file_type="image/png")
    assert (first.via, second.via) == ("upload", "reuse")
    assert second.file_id != first.file_id and second.checksum == sha(data)
    # One logical upload retried with its reuse_request_id answers the same file_id.
    again = b.bot.upload_file(io.BytesIO(data), file_name="b.png", reuse_request_id=second.reuse_request_id)
    assert again.file_id == second.file_id
    fresh = os.urandom(70_000)
    streamed = b.bot.upload_file(io.BufferedReader(OneWayStream(fresh)), file_name="c.bin")
    assert streamed.via == "upload"
    buf = io.BytesIO()
    b.bot.download_file(streamed.file_id, buf)
    assert buf.getvalue() == fresh


def test_a_possession_challenge_is_answered_from_the_local_file(
    make_bot: Callable[[str], NewBot], other_account: Callable[[str], NewBot], tmp_path: Path
) -> None:
    owner = make_bot("files_owner")
    prover = other_account("files_prover")
    data = os.urandom(200_000)
    path = tmp_path / "shared.pdf"
    path.write_bytes(data)
    original = owner.bot.upload_file(path, file_type="application/pdf")
    proved = prover.bot.upload_file(path, file_type="application/pdf")
    assert (original.via, proved.via) == ("upload", "possession")
    assert proved.file_id != original.file_id
    assert prover.bot.get_file(file_id=proved.file_id).checksum == sha(data)
    prover.bot.close()


def test_a_possession_lock_out_is_raised_at_once_as_a_typed_429(
    make_bot: Callable[[str], NewBot], other_account: Callable[[str], NewBot]
) -> None:
    owner = make_bot("files_locked_owner")
    taker = other_account("files_locked_taker")
    data = os.urandom(50_000)
    owner.bot.upload_file(data, file_name="locked.bin")
    for i in range(20):  # challenges asked for and never answered, until the tries are used up
        try:
            taker.bot.create_upload_credentials(file_name="locked.bin", file_size=len(data), checksum=sha(data),
                                                reuse_request_id=f"ask-{i}")
        except TooManyRequestsError:
            break
    else:
        pytest.fail("no lock-out after 20 unanswered challenges")
    started = time.monotonic()
    with pytest.raises(TooManyRequestsError) as locked:
        taker.bot.upload_file(data, file_name="locked.bin")
    assert time.monotonic() - started < 10  # not the 60+ s retry_after
    assert locked.value.retry_after is not None and locked.value.retry_after > 60
    taker.bot.close()


def test_bad_input(make_bot: Callable[[str], NewBot]) -> None:
    b = make_bot("files_bad")
    with pytest.raises(TypeError, match="file_name"):
        b.bot.upload_file(b"abc")
    with pytest.raises(TypeError, match="path, bytes or a binary stream"):
        b.bot.upload_file(12)  # type: ignore[arg-type]
    with pytest.raises(BadRequestError) as empty:
        b.bot.upload_file(b"", file_name="empty.txt")
    assert empty.value.error_code == 400


def test_the_asyncio_file_flow(service: Service, make_bot: Callable[[str], NewBot], tmp_path: Path) -> None:
    b = make_bot("files_async")
    data = os.urandom(500_000)
    path = tmp_path / "async.bin"
    path.write_bytes(data)

    async def main() -> None:
        async with AsyncBotClient(b.token, base_url=service.base_url) as bot:
            up = await bot.upload_file(path)
            again = await bot.upload_file(data, file_name="again.bin")
            assert (up.via, again.via) == ("upload", "reuse")
            buf = io.BytesIO()
            await bot.download_file(up.file_id, buf)
            assert buf.getvalue() == data

    asyncio.run(main())


def test_a_lost_answer_to_complete_is_retried_and_yields_the_same_file_id(make_bot: Callable[[str], NewBot], proxy: Proxy) -> None:
    b = make_bot("files_lost")
    calls: list[str] = []
    lost: list[str] = []

    def drop_first_complete(path: str, status: int, body: bytes) -> None | str:
        if path.endswith(("/files/upload-credentials", "/files/complete")):
            calls.append(path.rsplit("/", 1)[1])
        if path.endswith("/files/complete") and status == 200 and not lost:
            lost.append(json.loads(body)["result"]["file_id"])
            return "drop"
        return None

    proxy.hooks.append(drop_first_complete)
    with BotClient(b.token, base_url=proxy.url) as bot:
        up = bot.upload_file(os.urandom(20_000), file_name="retry.bin")
    assert up.file_id == lost[0] and up.via == "reuse"
    assert calls == ["upload-credentials", "complete", "upload-credentials"]
