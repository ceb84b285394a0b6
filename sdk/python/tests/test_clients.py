"""The clients against the running service: every operation of the OpenAPI document has its
method, the console's walk, typed errors of both surfaces, and the retry rules."""

from __future__ import annotations

import asyncio
import inspect
import json
import re
import socket
import threading
import time
from collections.abc import Callable, Iterator

import httpx
import pytest
from conftest import ROOT, Answer, NewBot, Proxy, Service, unique

from botplatform import (
    AdminClient,
    AsyncAdminClient,
    AsyncBotClient,
    AsyncConsoleClient,
    BadRequestError,
    BotClient,
    BotPlatformError,
    ConsoleClient,
    NetworkError,
    NotFoundError,
    ServerError,
    TooManyRequestsError,
    UnauthorizedError,
)
from botplatform._generated.methods import OPERATIONS
from botplatform.models import InlineKeyboardButton, InlineKeyboardRow, ReplyMarkup

CLIENTS = {
    "RuntimeService": (BotClient, AsyncBotClient),
    "ConsoleService": (ConsoleClient, AsyncConsoleClient),
    "AdminService": (AdminClient, AsyncAdminClient),
}


def snake(name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


def test_every_operation_of_the_document_is_a_method_of_its_clients() -> None:
    doc = json.loads((ROOT / "gateway/generated/openapi.json").read_text())
    seen = 0
    for path, item in doc["paths"].items():
        for method, op in item.items():
            service, _, rpc = op["operationId"].partition("_")
            if "_" in rpc:  # an additional binding of the same RPC (GET getMe)
                continue
            seen += 1
            assert service in CLIENTS, f"{op['operationId']}: no Python client for {service} (botplatform/clients.py)"
            name = snake(rpc)
            binding = OPERATIONS[name]
            assert (binding.http_method, binding.path) == (method.upper(), path)
            body = op.get("requestBody", {}).get("content", {}).get("application/json", {}).get("schema", {})
            wire = {p["name"] for p in op.get("parameters", [])} | set(body.get("properties", {}))
            for cls in CLIENTS[service]:
                fn = getattr(cls, name, None)
                assert fn is not None, f"{cls.__name__} has no {name} ({op['operationId']})"
                assert inspect.iscoroutinefunction(fn) == cls.__name__.startswith("Async")
                params = set(inspect.signature(fn).parameters) - {"self"}
                if binding.body in ("*", None):
                    # Every parameter and body field, by its Python name (fileName -> file_name, from -> from_).
                    expected = {snake(w).rstrip("_") for w in wire}
                    assert {p.rstrip("_") for p in params} == expected, f"{cls.__name__}.{name}"
    runtime = [op for op in OPERATIONS.values() if op.surface == "runtime"]
    assert seen == len(OPERATIONS) and len(runtime) >= 27


def test_the_console_walk_create_approve_token_get_me(service: Service, console: ConsoleClient, admin: AdminClient) -> None:
    username = unique("walk")
    created = console.create_application(name="Walk", username=username)
    assert created.review_status == "pending" and created.token_prefix is None
    approved = admin.approve_bot(created.id)
    assert approved.review_status == "approved"
    detail = console.get_my_bot(created.id)
    assert detail.one_time_token and detail.one_time_token.startswith("sbot_")
    assert console.get_my_bot(created.id).one_time_token is None  # shown once
    with BotClient(detail.one_time_token, base_url=service.base_url) as bot:
        me = bot.get_me()
        assert (me.id, me.username, me.is_bot) == (created.id, username, True)
    updated = console.update_my_bot(created.id, bot={"short_description": "Says things back"})
    assert updated.short_description == "Says things back"
    assert any(b.id == created.id for b in console.list_my_bots(limit=100).items)


def test_messages_with_models_and_plain_dicts(make_bot: Callable[[str], NewBot], console: ConsoleClient) -> None:
    b = make_bot("messages")
    sent = console.create_test_update(b.id, text="hi", chat_id=4100)
    updates = b.bot.get_updates(timeout=0)
    assert [(u.update_id, u.message.text if u.message else None) for u in updates] == [(sent.update_id, "hi")]
    keyboard = ReplyMarkup(inline_keyboard=[InlineKeyboardRow(buttons=[InlineKeyboardButton(text="Yes", callback_data="y")])])
    m = b.bot.send_message(chat_id=4100, text="Sure?", reply_markup=keyboard)
    assert m.reply_markup and m.reply_markup.inline_keyboard and m.reply_markup.inline_keyboard[0].buttons
    assert m.reply_markup.inline_keyboard[0].buttons[0].callback_data == "y"
    m2 = b.bot.send_message(chat_id=4100, text="*bold*", parse_mode="MarkdownV2",
                            reply_markup={"inline_keyboard": [{"buttons": [{"text": "No", "callback_data": "n"}]}]})
    assert m2.text == "bold" and m2.entities and m2.entities[0].type == "bold"


def test_errors_are_typed_on_both_surfaces(service: Service, make_bot: Callable[[str], NewBot], console: ConsoleClient) -> None:
    with pytest.raises(BadRequestError) as refused:
        console.create_application(name="", username="X")
    e = refused.value
    assert (e.error_code, e.code) == (400, "INVALID_ARGUMENT")
    assert [(d.field, d.reason) for d in e.details] == [("name", "REQUIRED"), ("username", "INVALID_FORMAT")]

    with pytest.raises(NotFoundError) as missing:
        console.get_my_bot("bot_doesnotexist")
    assert missing.value.error_code == 404 and missing.value.method == "get_my_bot"

    b = make_bot("errors")
    with pytest.raises(BadRequestError) as bad:
        b.bot.send_message(chat_id=4200, text="nobody wrote")
    assert bad.value.error_code == 400 and "chat not found" in bad.value.description

    with BotClient("sbot_wrongwrongwrongwrong", base_url=service.base_url) as wrong:
        with pytest.raises(UnauthorizedError) as unauthorized:
            wrong.get_me()
    assert unauthorized.value.error_code == 401 and "sbot_wrong" not in str(unauthorized.value)


def burst(token: str, base_url: str, chat_id: int, *, retries: int = 3, max_retry_after: float = 60.0) -> list[object]:
    """Twelve sends to one chat at once, each result or error in order. Sent one after another,
    ten sends on a loaded machine can spread over more than one 2 s window and never meet the
    limit; twelve sent together fall in at most two windows, so six of them share one."""

    async def go() -> list[object]:
        async with AsyncBotClient(token, base_url=base_url, retries=retries, max_retry_after=max_retry_after) as bot:
            sends = (bot.send_message(chat_id=chat_id, text=f"b{i}") for i in range(12))
            return list(await asyncio.gather(*sends, return_exceptions=True))

    return asyncio.run(go())


def test_a_429_is_typed_and_retried_after_retry_after(service: Service, make_bot: Callable[[str], NewBot], console: ConsoleClient) -> None:
    # The harness runs with RATE_LIMIT_CHAT=5/2s: the sixth send to one chat within a 2 s window is refused.
    b = make_bot("limited")
    console.create_test_update(b.id, text="hi", chat_id=4300)
    results = burst(b.token, service.base_url, 4300, retries=0)
    errors = [r for r in results if isinstance(r, BaseException)]
    assert errors and all(isinstance(r, TooManyRequestsError) for r in errors), results
    e = errors[0]
    assert isinstance(e, TooManyRequestsError)
    assert (e.error_code, e.code) == (429, "RESOURCE_EXHAUSTED")
    assert e.retry_after is not None and 1 <= e.retry_after <= 2
    assert e.retryable
    # The default client waits the retry_after out and succeeds.
    started = time.monotonic()
    for i in range(8):
        b.bot.send_message(chat_id=4300, text=f"n{i}")
    assert time.monotonic() - started >= 0.9
    # A retry_after beyond max_retry_after is raised at once.
    impatient = burst(b.token, service.base_url, 4300, max_retry_after=0.1)
    assert any(isinstance(r, TooManyRequestsError) for r in impatient), impatient


@pytest.fixture
def mute_server() -> Iterator[tuple[str, list[int]]]:
    """A server that reads each request and closes the connection without answering."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    accepted: list[int] = []

    def serve() -> None:
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            accepted.append(1)
            conn.recv(65536)
            conn.close()

    threading.Thread(target=serve, daemon=True).start()
    yield f"http://127.0.0.1:{listener.getsockname()[1]}", accepted
    listener.close()


def test_a_lost_answer_is_retried_only_for_idempotent_methods(mute_server: tuple[str, list[int]]) -> None:
    url, accepted = mute_server
    with BotClient("sbot_x", base_url=url, retries=2) as bot:
        with pytest.raises(NetworkError) as lost:
            bot.get_me()
        assert len(accepted) == 3 and lost.value.error_code == 0 and lost.value.retryable
        accepted.clear()
        with pytest.raises(NetworkError):
            bot.send_message(chat_id=1, text="maybe sent")
        assert len(accepted) == 1


def test_a_refused_connection_is_retried_for_every_method() -> None:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()  # nothing listens there now
    attempts: list[str] = []
    hooks = httpx.Client(event_hooks={"request": [lambda r: attempts.append(r.url.path)]})
    with BotClient("sbot_x", base_url=f"http://127.0.0.1:{port}", retries=2, http_client=hooks) as bot:
        started = time.monotonic()
        with pytest.raises(NetworkError) as refused:
            bot.send_message(chat_id=1, text="never sent")
    assert len(attempts) == 3 and time.monotonic() - started < 10
    assert refused.value.code == "UNAVAILABLE" and "ConnectError" in refused.value.description
    hooks.close()


def test_a_503_is_retried_only_for_idempotent_methods(make_bot: Callable[[str], NewBot], console: ConsoleClient,
                                                     proxy: Proxy) -> None:
    b = make_bot("retry_503")
    console.create_test_update(b.id, text="hi", chat_id=4500)
    calls: list[str] = []

    def unavailable_once_each(path: str, status: int, body: bytes) -> None | Answer:
        name = path.split("?")[0].rsplit("/", 1)[1]
        calls.append(name)
        if calls.count(name) > 1:
            return None
        refused = {"ok": False, "error_code": 503, "description": "Service Unavailable"}
        return 503, json.dumps(refused).encode(), {"content-type": "application/json"}

    proxy.hooks.append(unavailable_once_each)
    with BotClient(b.token, base_url=proxy.url) as bot:
        assert bot.get_me().username == b.username  # a read: sent again after a backoff
        with pytest.raises(ServerError) as failed:
            bot.send_message(chat_id=4500, text="maybe sent")  # may have been sent: not again
    assert (failed.value.error_code, failed.value.code, failed.value.retryable) == (503, "UNAVAILABLE", True)
    assert calls == ["getMe", "getMe", "sendMessage"]


def test_long_polls_get_their_wait_plus_a_margin(service: Service, make_bot: Callable[[str], NewBot]) -> None:
    b = make_bot("longpoll")
    with BotClient(b.token, base_url=service.base_url, timeout=1.0) as short:
        started = time.monotonic()
        assert short.get_updates(timeout=2) == []  # a 1 s read timeout would have cut a 2 s poll
        assert time.monotonic() - started >= 1.9


def test_the_async_clients(service: Service, console: ConsoleClient, admin: AdminClient) -> None:
    async def walk() -> None:
        async with AsyncConsoleClient(service.developer_jwt, base_url=service.base_url) as dev, \
                AsyncAdminClient(service.admin_jwt, base_url=service.base_url) as reviewer:
            created = await dev.create_application(name="Async", username=unique("async"))
            await reviewer.approve_bot(created.id)
            token = (await dev.get_my_bot(created.id)).one_time_token
            assert token
            async with AsyncBotClient(token, base_url=service.base_url) as bot:
                await dev.create_test_update(created.id, text="async hi", chat_id=4400)
                updates = await bot.get_updates(timeout=5)
                assert [u.message.text for u in updates if u.message] == ["async hi"]
                sent = await bot.send_message(chat_id=4400, text="async hello")
                assert sent.chat and sent.chat.id == 4400
                with pytest.raises(BotPlatformError) as bad:
                    await bot.send_message(chat_id=4401, text="nobody wrote")
                assert isinstance(bad.value, BadRequestError)

    asyncio.run(walk())
