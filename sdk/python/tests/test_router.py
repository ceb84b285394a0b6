"""The router: commands parsed as Telegram marks them (UTF-16 offsets), and a bot's commands and
button presses handled end to end against the running service."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable

from conftest import NewBot, Service

from botplatform import (
    AsyncBotClient,
    CallbackQueryContext,
    CommandContext,
    ConsoleClient,
    Context,
    Router,
    inline_keyboard,
    parse_command,
)
from botplatform.models import Message


def message(text: str, entities: list[dict[str, object]], *, caption: bool = False) -> Message:
    body: dict[str, object] = {"message_id": 1, "date": 1}
    if caption:
        body.update(caption=text, caption_entities=entities)
    else:
        body.update(text=text, entities=entities)
    return Message.model_validate(body)


def test_parse_command() -> None:
    cmd = parse_command(message("/start@My_Bot   hello there", [{"type": "bot_command", "offset": 0, "length": 13}]))
    assert cmd and (cmd.command, cmd.username, cmd.args) == ("start", "My_Bot", "hello there")
    # Offsets count UTF-16 code units: the emoji after the command is two of them.
    cmd = parse_command(message("/ping 😀 x", [{"type": "bot_command", "offset": 0, "length": 5}]))
    assert cmd and (cmd.command, cmd.username, cmd.args) == ("ping", None, "😀 x")
    assert parse_command(message("😀 /start", [{"type": "bot_command", "offset": 3, "length": 6}])) is None
    assert parse_command(message("/start", [])) is None  # no entity: not a command
    cmd = parse_command(message("/help me", [{"type": "bot_command", "offset": 0, "length": 5}], caption=True))
    assert cmd and (cmd.command, cmd.args) == ("help", "me")


def test_commands_and_button_presses_against_the_service(
    service: Service, make_bot: Callable[[str], NewBot], console: ConsoleClient
) -> None:
    b = make_bot("router")
    log: list[str] = []

    async def main() -> None:
        async with AsyncBotClient(b.token, base_url=service.base_url) as bot:
            router = Router(bot)
            sent: list[Message] = []

            @router.command("start", "begin")
            async def start(ctx: CommandContext) -> None:
                log.append(f"command {ctx.command} [{ctx.args}]")
                sent.append(await ctx.reply("Pick", reply_markup=inline_keyboard([[{"text": "One", "callback_data": "pick:1"}]])))

            @router.callback_query(re.compile(r"^pick:(\d+)$"))
            async def pick(ctx: CallbackQueryContext) -> None:
                assert ctx.match
                log.append(f"picked {ctx.match[1]} from {ctx.from_user.username if ctx.from_user else None}")
                edited = await ctx.edit_message_text(f"Picked {ctx.match[1]}")
                log.append(f"edited {edited.text}")
                router.stop()  # answered by the router after this returns

            @router.on("message")
            async def other(ctx: Context) -> None:
                log.append(f"other {ctx.message.text if ctx.message else None}")

            polling = asyncio.create_task(router.run_polling(timeout=10))
            try:
                console.create_test_update(b.id, text="/start@someone_else hi", chat_id=9100)
                console.create_test_update(b.id, text=f"/begin@{b.username} now", chat_id=9100)
                for _ in range(200):
                    if sent:
                        break
                    await asyncio.sleep(0.05)
                console.create_test_callback_query(b.id, message_id=sent[0].message_id, callback_data="pick:1", chat_id=9100)
                await asyncio.wait_for(asyncio.shield(polling), 15)
            finally:
                router.stop()
                await polling

    asyncio.run(main())
    assert log == [
        "other /start@someone_else hi",  # a command for another bot is not this bot's
        "command begin [now]",
        "picked 1 from test_user",
        "edited Picked 1",
    ]
