"""A pyTelegramBotAPI bot as its documentation writes one, configured only with this
service's API root (apihelper.API_URL and FILE_URL) and a token in Telegram's form
(BOT_TOKEN; pyTelegramBotAPI refuses a token without a colon): "/file" makes it send a
document and a photo from bytes (its multipart uploads name the file unquoted, filename=...),
then fetch the document back with get_file and download_file. Each thing it does is printed
as one JSON line.
"""
import hashlib
import io
import json
import logging
import os
import signal
import sys
import threading

import telebot
from telebot import apihelper


def emit(**event):
    print(json.dumps(event), flush=True)


root = os.environ["API_ROOT"]
apihelper.API_URL = root + "/bot{0}/{1}"
apihelper.FILE_URL = root + "/file/bot{0}/{1}"
bot = telebot.TeleBot(os.environ["BOT_TOKEN"])


@bot.message_handler(commands=["file"])
def send_file(message):
    data = b"quarterly numbers\n" * 100
    doc = io.BytesIO(data)
    doc.name = "report 2026.txt"
    sent = bot.send_document(message.chat.id, doc, caption="the report")
    photo = io.BytesIO(os.urandom(1500))
    photo.name = "photo.png"
    pic = bot.send_photo(message.chat.id, photo, caption="a photo")
    info = bot.get_file(sent.document.file_id)
    back = bot.download_file(info.file_path)
    emit(event="file", file_name=sent.document.file_name, size=sent.document.file_size, caption=sent.caption,
         sent=hashlib.sha256(data).hexdigest(), downloaded=hashlib.sha256(back).hexdigest(),
         photo_caption=pic.caption, photo_size=pic.photo[-1].file_size)


def stop(*_):
    bot.stop_polling()


signal.signal(signal.SIGTERM, stop)
logging.basicConfig(stream=sys.stderr, level=logging.WARNING)
me = bot.get_me()
emit(event="started", id=me.id, token_id=bot.bot_id if hasattr(bot, "bot_id") else None)
bot.polling(non_stop=True, timeout=1, long_polling_timeout=1)
emit(event="stopped")
