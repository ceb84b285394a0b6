"""Echo bot by long polling: says every text message back, as a reply.

    BOT_TOKEN=sbot_... python examples/echo_polling.py

BASE_URL is the service (default http://127.0.0.1:8080, where `npm start` listens).
Ctrl-C or SIGTERM stops it cleanly: the updates handled so far are confirmed first.
"""

from __future__ import annotations

from _settings import bot_settings, log

from botplatform import BotClient, Update, run_polling

NAME = "echo-polling"


def main() -> None:
    token, base_url = bot_settings(NAME)
    with BotClient(token, base_url=base_url) as bot:

        def echo(update: Update) -> None:
            message = update.message
            if message is None or message.chat is None or message.text is None:
                return
            chat_id = message.chat.id
            log(NAME, f"update {update.update_id} (seq {update.update_seq}) from chat {chat_id}: {message.text}")
            sent = bot.send_message(chat_id=chat_id, text=message.text, reply_to_message_id=message.message_id)
            log(NAME, f"replied with message {sent.message_id} in chat {chat_id}")

        me = bot.get_me()
        # A bot receives by webhook or by polling, never both: remove any webhook.
        bot.delete_webhook()
        log(NAME, f"@{me.username} is polling {base_url}")
        run_polling(bot, echo, timeout=30)  # until Ctrl-C or SIGTERM
        log(NAME, "stopped")


if __name__ == "__main__":
    main()
