"""aiogram's example bots as its documentation writes them, configured only with this
service's API root (API_ROOT) and a token in Telegram's form (BOT_TOKEN):

- MODE=polling: /start shows an inline keyboard (InlineKeyboardBuilder); a press is answered
  (callback.answer) and edits the message (callback.message.edit_text).
- MODE=webhook: aiogram's aiohttp webhook server (SimpleRequestHandler with
  handle_in_background=False, behind HTTPS with CERT_FILE and KEY_FILE, secret SECRET), whose
  handler returns the reply as a method: aiogram writes it into the webhook's answer.

Each thing it does is printed as one JSON line.
"""
import asyncio
import json
import logging
import os
import ssl
import sys

from aiogram import Bot, Dispatcher, F
from aiogram.client.session.aiohttp import AiohttpSession
from aiogram.client.telegram import TelegramAPIServer
from aiogram.filters import CommandStart
from aiogram.types import CallbackQuery, Message
from aiogram.utils.keyboard import InlineKeyboardBuilder
from aiogram.webhook.aiohttp_server import SimpleRequestHandler, setup_application
from aiohttp import web

dp = Dispatcher()


def emit(**event):
    print(json.dumps(event), flush=True)


@dp.message(CommandStart())
async def start(message: Message):
    builder = InlineKeyboardBuilder()
    builder.button(text="Red", callback_data="color:red")
    builder.button(text="Green", callback_data="color:green")
    if os.environ["MODE"] == "webhook":
        # Answered in the webhook's response: the method is returned, not awaited.
        emit(event="answered_in_webhook")
        return message.answer("Pick a color", reply_markup=builder.as_markup())
    sent = await message.answer("Pick a color", reply_markup=builder.as_markup())
    emit(event="menu", message_id=sent.message_id)


@dp.callback_query(F.data.startswith("color:"))
async def pick(callback: CallbackQuery):
    color = callback.data.split(":")[1]
    await callback.answer(f"{color.title()} it is")
    edited = await callback.message.edit_text(f"You picked {color}")
    emit(event="pressed", data=callback.data, edited=edited.text)


async def main() -> None:
    logging.basicConfig(stream=sys.stderr, level=logging.WARNING)
    session = AiohttpSession(api=TelegramAPIServer.from_base(os.environ["API_ROOT"]))
    bot = Bot(os.environ["BOT_TOKEN"], session=session)
    if os.environ["MODE"] == "polling":
        emit(event="started")
        await dp.start_polling(bot, polling_timeout=1)
        return
    app = web.Application()
    SimpleRequestHandler(dispatcher=dp, bot=bot, secret_token=os.environ["SECRET"], handle_in_background=False).register(app, path="/aiogram")
    setup_application(app, dp, bot=bot)
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(os.environ["CERT_FILE"], os.environ["KEY_FILE"])
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=context)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]
    await bot.set_webhook(f"https://127.0.0.1:{port}/aiogram", secret_token=os.environ["SECRET"])
    emit(event="started", port=port)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    import signal
    loop.add_signal_handler(signal.SIGTERM, stop.set)
    await stop.wait()
    await runner.cleanup()
    await bot.session.close()


if __name__ == "__main__":
    asyncio.run(main())
