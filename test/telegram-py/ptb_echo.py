"""An echo bot written with python-telegram-bot as its documentation shows, configured only
with this service's API root (API_ROOT) and a token (BOT_TOKEN).

It echoes each text message with sendMessage, except "photo <n>": then it sends <n> random
bytes as a photo (a multipart upload), fetches the photo back with getFile and downloads it.
At start it sets its command menu. Each thing it does is printed as one JSON line.
"""
import hashlib
import json
import logging
import os
import sys

from telegram import BotCommand, Update
from telegram.ext import Application, ContextTypes, MessageHandler, filters


def emit(**event):
    print(json.dumps(event), flush=True)


async def post_init(app: Application) -> None:
    await app.bot.set_my_commands([BotCommand("start", "Start the bot"), BotCommand("help", "Show help")])
    commands = await app.bot.get_my_commands()
    emit(event="started", id=app.bot.id, username=app.bot.username,
         commands=[{"command": c.command, "description": c.description} for c in commands])


async def echo(update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
    text = update.message.text
    emit(event="update", update_id=update.update_id, text=text, chat=update.effective_chat.id,
         from_id=update.effective_user.id)
    if text.startswith("photo "):
        data = os.urandom(int(text.split()[1]))
        sent = await update.message.reply_photo(photo=data, caption="pic", filename="pic.png")
        file = await context.bot.get_file(sent.photo[-1].file_id)
        back = await file.download_as_bytearray()
        emit(event="photo", caption=sent.caption, sent=hashlib.sha256(data).hexdigest(),
             downloaded=hashlib.sha256(back).hexdigest(), size=file.file_size)
        return
    sent = await update.message.reply_text(text)
    emit(event="reply", text=sent.text, chat=sent.chat.id, from_id=sent.from_user.id)


def main() -> None:
    logging.basicConfig(stream=sys.stderr, level=logging.WARNING)
    root = os.environ["API_ROOT"]
    app = (
        Application.builder()
        .token(os.environ["BOT_TOKEN"])
        .base_url(f"{root}/bot")
        .base_file_url(f"{root}/file/bot")
        .post_init(post_init)
        .build()
    )
    app.add_handler(MessageHandler(filters.TEXT & ~filters.COMMAND, echo))
    app.run_polling(allowed_updates=Update.ALL_TYPES, timeout=2)
    emit(event="stopped")


if __name__ == "__main__":
    main()
