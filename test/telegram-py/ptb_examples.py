"""python-telegram-bot's example bots as its documentation writes them (the command bot and
examples/inlinekeyboard.py), configured only with this service's API root (API_ROOT) and a
token (BOT_TOKEN): /start and /help; /menu shows an inline keyboard whose button press is
answered (query.answer) and edits the message (query.edit_message_text); /html and /md reply
with formatting; /slow shows "typing…" (send_chat_action) before it answers. Each thing it
does is printed as one JSON line.
"""
import asyncio
import json
import logging
import os
import sys

from telegram import InlineKeyboardButton, InlineKeyboardMarkup, Update
from telegram.constants import ChatAction, ParseMode
from telegram.ext import Application, CallbackQueryHandler, CommandHandler, ContextTypes


def emit(**event):
    print(json.dumps(event), flush=True)


def entities(message):
    return [{"type": e.type, "offset": e.offset, "length": e.length, **({"url": e.url} if e.url else {})} for e in message.entities]


async def start(update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
    await update.message.reply_text("Hi! Use /menu to choose an option.")
    emit(event="command", command="start")


async def help_command(update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
    await update.message.reply_text("Use /menu to test this bot.")
    emit(event="command", command="help")


async def menu(update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
    keyboard = [
        [InlineKeyboardButton("Option 1", callback_data="1"), InlineKeyboardButton("Option 2", callback_data="2")],
        [InlineKeyboardButton("Option 3", callback_data="3")],
    ]
    sent = await update.message.reply_text("Please choose:", reply_markup=InlineKeyboardMarkup(keyboard))
    emit(event="menu", message_id=sent.message_id)


async def button(update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
    query = update.callback_query
    # CallbackQueries need to be answered, even if no notification to the user is needed.
    await query.answer()
    edited = await query.edit_message_text(text=f"Selected option: {query.data}")
    emit(event="pressed", data=query.data, edited=edited.text, message_id=edited.message_id)


async def html(update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
    sent = await update.message.reply_html("<b>Bold</b>, <i>italic</i> and <code>code</code>")
    emit(event="formatted", mode="HTML", text=sent.text, entities=entities(sent))


async def markdown(update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
    sent = await update.message.reply_text("*bold* _italic_ [link](https://example.com/)", parse_mode=ParseMode.MARKDOWN_V2)
    emit(event="formatted", mode="MarkdownV2", text=sent.text, entities=entities(sent))


async def slow(update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
    await context.bot.send_chat_action(chat_id=update.effective_chat.id, action=ChatAction.TYPING)
    await asyncio.sleep(0.1)
    await update.message.reply_text("Done thinking")
    emit(event="slow")


async def post_init(app: Application) -> None:
    emit(event="started", id=app.bot.id)


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
    app.add_handler(CommandHandler("start", start))
    app.add_handler(CommandHandler("help", help_command))
    app.add_handler(CommandHandler("menu", menu))
    app.add_handler(CommandHandler("html", html))
    app.add_handler(CommandHandler("md", markdown))
    app.add_handler(CommandHandler("slow", slow))
    app.add_handler(CallbackQueryHandler(button))
    app.run_polling(allowed_updates=Update.ALL_TYPES, timeout=1)
    emit(event="stopped")


if __name__ == "__main__":
    main()
