"""The long-polling runners against the running service: order, offset confirmation, a clean
stop in the middle of a long poll, a failing handler, a webhook, and another poller's 409."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Callable

import pytest
from conftest import Answer, NewBot, Proxy, Service

from botplatform import (
    AsyncBotClient,
    AsyncPoller,
    BotClient,
    ConsoleClient,
    Poller,
    PollingConflictError,
    ServerError,
    TooManyRequestsError,
    Update,
    WebhookActiveError,
)


def texts(updates: list[Update]) -> list[str]:
    return [u.message.text for u in updates if u.message and u.message.text]


def test_handles_updates_in_order_and_confirms_them_when_stopped(make_bot: Callable[[str], NewBot], console: ConsoleClient) -> None:
    b = make_bot("poll_order")
    for i in range(3):
        console.create_test_update(b.id, text=f"m{i}", chat_id=5100)
    seen: list[Update] = []

    def handle(update: Update) -> None:
        seen.append(update)
        if len(seen) == 3:
            poller.stop()

    poller = Poller(b.bot, handle, timeout=5)
    poller.run()
    assert texts(seen) == ["m0", "m1", "m2"] and [u.update_seq for u in seen] == [1, 2, 3]
    assert poller.offset == 4
    assert b.bot.get_updates(timeout=0) == []  # confirmed: a restart does not see them again


def test_stop_ends_a_long_poll_at_once(make_bot: Callable[[str], NewBot], console: ConsoleClient) -> None:
    b = make_bot("poll_stop")
    console.create_test_update(b.id, text="one", chat_id=5200)
    seen: list[Update] = []
    poller = Poller(b.bot, seen.append, timeout=30)
    thread = threading.Thread(target=poller.run)
    thread.start()
    deadline = time.monotonic() + 10
    while not seen and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(0.3)  # now waiting in a 30 s long poll
    started = time.monotonic()
    poller.stop()
    thread.join(10)
    assert not thread.is_alive() and time.monotonic() - started < 5  # the poll waits 30 s
    assert texts(seen) == ["one"]
    assert b.bot.get_updates(timeout=0) == []


def test_a_failing_handler_is_reported_and_passed_over(make_bot: Callable[[str], NewBot], console: ConsoleClient) -> None:
    b = make_bot("poll_fail")
    for text in ("boom", "fine"):
        console.create_test_update(b.id, text=text, chat_id=5300)
    errors: list[tuple[BaseException, Update | None]] = []
    handled: list[str] = []

    def handle(update: Update) -> None:
        assert update.message and update.message.text
        if update.message.text == "boom":
            raise ValueError("handler bug")
        handled.append(update.message.text)
        poller.stop()

    poller = Poller(b.bot, handle, timeout=5, on_error=lambda e, u, _: errors.append((e, u)))
    poller.run()
    assert handled == ["fine"]
    assert [(str(e), u.update_seq if u else None) for e, u in errors] == [("handler bug", 1)]


def test_refuses_to_poll_while_a_webhook_is_set(make_bot: Callable[[str], NewBot]) -> None:
    b = make_bot("poll_webhook")
    assert b.bot.set_webhook(url="https://127.0.0.1:9/hook", secret_token="s" * 32)
    with pytest.raises(WebhookActiveError, match="delete_webhook"):
        Poller(b.bot, print).run()


def test_backs_off_when_another_poller_takes_over(make_bot: Callable[[str], NewBot], console: ConsoleClient) -> None:
    b = make_bot("poll_conflict")
    conflicts: list[tuple[BaseException, float | None]] = []
    seen: list[Update] = []

    def handle(update: Update) -> None:
        seen.append(update)
        poller.stop()

    poller = Poller(b.bot, handle, timeout=20, backoff=0.2, on_error=lambda e, _, wait: conflicts.append((e, wait)))
    thread = threading.Thread(target=poller.run)
    thread.start()
    time.sleep(0.5)
    assert b.bot.get_updates(timeout=0) == []  # a second poller: ours gets 409 and backs off
    deadline = time.monotonic() + 10
    while not conflicts and time.monotonic() < deadline:
        time.sleep(0.05)
    console.create_test_update(b.id, text="after the conflict", chat_id=5400)
    thread.join(15)
    assert not thread.is_alive()
    assert isinstance(conflicts[0][0], PollingConflictError) and conflicts[0][1] is not None
    assert texts(seen) == ["after the conflict"]


def test_the_asyncio_poller(service: Service, make_bot: Callable[[str], NewBot], console: ConsoleClient) -> None:
    b = make_bot("poll_async")
    console.create_test_update(b.id, text="a0", chat_id=5500)
    console.create_test_update(b.id, text="a1", chat_id=5500)

    async def main() -> tuple[list[Update], float]:
        async with AsyncBotClient(b.token, base_url=service.base_url) as bot:
            seen: list[Update] = []

            async def handle(update: Update) -> None:
                seen.append(update)
                assert update.message and update.message.chat
                await bot.send_message(chat_id=update.message.chat.id, text="ok")

            poller = AsyncPoller(bot, handle, timeout=30)
            task = asyncio.create_task(poller.run())
            while len(seen) < 2:
                await asyncio.sleep(0.05)
            await asyncio.sleep(0.3)  # waiting in a 30 s long poll
            started = time.monotonic()
            poller.stop()
            await asyncio.wait_for(task, 5)
            return seen, time.monotonic() - started

    seen, stop_took = asyncio.run(main())
    assert texts(seen) == ["a0", "a1"] and stop_took < 5  # the poll waits 30 s
    assert b.bot.get_updates(timeout=0) == []


def test_a_429_waits_its_retry_after_and_a_502_backs_off(
    make_bot: Callable[[str], NewBot], console: ConsoleClient, proxy: Proxy
) -> None:
    b = make_bot("poll_429")
    refused: list[int] = []

    def refuse_twice(path: str, status: int, body: bytes) -> None | Answer:
        if not path.endswith("/getUpdates") or len(refused) >= 2:
            return None
        refused.append(status)
        if len(refused) == 1:
            limited = {"ok": False, "error_code": 429, "description": "Too Many Requests: retry after 1",
                       "parameters": {"retry_after": 1}}
            return 429, json.dumps(limited).encode(), {"content-type": "application/json", "retry-after": "1"}
        return 502, b"<html>bad gateway</html>", {"content-type": "text/html"}

    proxy.hooks.append(refuse_twice)
    console.create_test_update(b.id, text="through the proxy", chat_id=5600)
    reported: list[tuple[BaseException, float | None]] = []
    seen: list[Update] = []

    def handle(update: Update) -> None:
        seen.append(update)
        poller.stop()

    with BotClient(b.token, base_url=proxy.url) as bot:
        poller = Poller(bot, handle, timeout=5, backoff=0.2, on_error=lambda e, _, wait: reported.append((e, wait)))
        started = time.monotonic()
        poller.run()
    assert texts(seen) == ["through the proxy"]
    assert time.monotonic() - started >= 1.0
    first, second = reported
    assert isinstance(first[0], TooManyRequestsError) and first[1] == 1.0
    assert isinstance(second[0], ServerError) and second[0].error_code == 502
    assert second[1] is not None and 0.2 <= second[1] <= 0.4  # the second failure in a row: backoff x 2, jittered
