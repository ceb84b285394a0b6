"""An echo bot written with aiogram as its documentation shows, configured only with this
service's API root (API_ROOT, as a custom TelegramAPIServer) and a token (BOT_TOKEN).

It echoes each text message with sendMessage, except "photo <n>": then it sends <n> random
bytes as a photo (a multipart upload), fetches the photo back with getFile and downloads it.
At start it sets its command menu. Each thing it does is printed as one JSON line.
"""
import asyncio
import hashlib
import json
import logging
import os
import sys

from aiogram import Bot, Dispatcher, F
from aiogram.client.session.aiohttp import AiohttpSession
from aiogram.client.telegram import TelegramAPIServer
from aiogram.types import BotCommand, BufferedInputFile, Message

dp = Dispatcher()


def emit(**event):
    print(json.dumps(event), flush=True)


@dp.message(F.text)
async def echo(message: Message, bot: Bot) -> None:
    text = message.text
    emit(event="update", text=text, chat=message.chat.id, from_id=message.from_user.id)
    if text.startswith("photo "):
        data = os.urandom(int(text.split()[1]))
        sent = await message.answer_photo(BufferedInputFile(data, filename="pic.png"), caption="pic")
        file = await bot.get_file(sent.photo[-1].file_id)
        back = await bot.download(file)
        emit(event="photo", caption=sent.caption, sent=hashlib.sha256(data).hexdigest(),
             downloaded=hashlib.sha256(back.read()).hexdigest(), size=file.file_size)
        return
    sent = await message.answer(text)
    emit(event="reply", text=sent.text, chat=sent.chat.id, from_id=sent.from_user.id)


@dp.update.outer_middleware()
async def record_update_id(handler, update, data):
    emit(event="update_id", update_id=update.update_id)
    return await handler(update, data)


@dp.startup()
async def on_startup(bot: Bot) -> None:
    await bot.set_my_commands([BotCommand(command="start", description="Start the bot"),
                               BotCommand(command="help", description="Show help")])
    me = await bot.get_me()
    commands = await bot.get_my_commands()
    emit(event="started", id=me.id, token_id=bot.id, username=me.username,
         commands=[{"command": c.command, "description": c.description} for c in commands])


async def main() -> None:
    logging.basicConfig(stream=sys.stderr, level=logging.WARNING)
    session = AiohttpSession(api=TelegramAPIServer.from_base(os.environ["API_ROOT"]))
    bot = Bot(os.environ["BOT_TOKEN"], session=session)
    await dp.start_polling(bot, polling_timeout=2)
    emit(event="stopped")


if __name__ == "__main__":
    asyncio.run(main())
