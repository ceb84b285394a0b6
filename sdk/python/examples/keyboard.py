"""A keyboard bot (asyncio, with the router) by long polling.

/start answers with a formatted message and an inline keyboard; each press of + or − is a
callback query, answered with a notification, and the message is edited to the new count
(its keyboard kept); /help lists the commands.

    BOT_TOKEN=sbot_... python examples/keyboard.py

BASE_URL is the service (default http://127.0.0.1:8080). Press the buttons in the console's
Test tab (docs/console.md). Ctrl-C or SIGTERM stops it cleanly.
"""

from __future__ import annotations

import asyncio
import re
import signal
from typing import Any

from _settings import bot_settings, log

from botplatform import AsyncBotClient, CallbackQueryContext, CommandContext, Context, Router, inline_keyboard

NAME = "keyboard"


def counter(n: int) -> dict[str, Any]:
    """The counter's keyboard; the count travels in callback_data, so the bot keeps no state."""
    return inline_keyboard([
        [{"text": "−", "callback_data": f"count:{n - 1}"}, {"text": "+", "callback_data": f"count:{n + 1}"}],
        [{"text": "What is this?", "url": "https://core.telegram.org/bots/features#inline-keyboards"}],
    ])


async def main() -> None:
    token, base_url = bot_settings(NAME)
    async with AsyncBotClient(token, base_url=base_url) as bot:
        router = Router(bot)

        @router.command("start")
        async def start(ctx: CommandContext) -> None:
            sent = await ctx.reply("<b>Counter</b>: 0", parse_mode="HTML", reply_markup=counter(0))
            log(NAME, f"/start in chat {ctx.chat.id if ctx.chat else '?'}: sent message {sent.message_id} with a keyboard")

        @router.command("help")
        async def help_(ctx: CommandContext) -> None:
            await ctx.reply("/start shows a counter with buttons; /help shows this.")

        @router.callback_query(re.compile(r"^count:(-?\d+)$"))
        async def count(ctx: CallbackQueryContext) -> None:
            assert ctx.match is not None
            n = int(ctx.match[1])
            await ctx.answer(f"Count is now {n}")
            edited = await ctx.edit_message_text(f"<b>Counter</b>: {n}", parse_mode="HTML", reply_markup=counter(n))
            log(NAME, f"pressed {ctx.data} on message {edited.message_id}: count {n}")

        @router.on("message")
        async def other(ctx: Context) -> None:
            await ctx.reply("Send /start for a counter.")

        me = await bot.get_me()
        # A bot receives by webhook or by polling, never both.
        await bot.delete_webhook()
        await bot.set_my_commands(commands=[{"command": "start", "description": "Show a counter"},
                                            {"command": "help", "description": "What this bot does"}])
        log(NAME, f"@{me.username} is polling {base_url}")
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, router.stop)
        await router.run_polling(timeout=30)
        log(NAME, "stopped")


if __name__ == "__main__":
    asyncio.run(main())
