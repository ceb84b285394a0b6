"""File bot by long polling: answers every text message with a file holding that text.

    BOT_TOKEN=sbot_... python examples/file_bot.py

The file is registered with upload_file (SHA-256 computed while reading, then uploaded, or
reused when the service already holds the same bytes: send the same text twice to see
"reuse"), sent with send_document, then downloaded back and checked.
"""

from __future__ import annotations

import hashlib
import io

from _settings import bot_settings, log

from botplatform import BotClient, Update, run_polling

NAME = "file-bot"


def main() -> None:
    token, base_url = bot_settings(NAME)
    with BotClient(token, base_url=base_url) as bot:

        def answer(update: Update) -> None:
            message = update.message
            if message is None or message.chat is None or message.text is None:
                return
            chat_id = message.chat.id
            data = message.text.encode()
            uploaded = bot.upload_file(io.BytesIO(data), file_name="message.txt", file_type="text/plain")
            sent = bot.send_document(chat_id=chat_id, file_id=uploaded.file_id,
                                     caption=f"{len(data)} bytes", reply_to_message_id=message.message_id)
            back = io.BytesIO()
            bot.download_file(uploaded.file_id, back)
            same = hashlib.sha256(back.getvalue()).hexdigest() == uploaded.checksum
            log(NAME, f"update {update.update_id}: sent {uploaded.file_id} by {uploaded.via} as message "
                      f"{sent.message_id} in chat {chat_id}; downloaded back {'intact' if same else 'CHANGED'}")

        me = bot.get_me()
        bot.delete_webhook()
        log(NAME, f"@{me.username} is polling {base_url}")
        run_polling(bot, answer, timeout=30)
        log(NAME, "stopped")


if __name__ == "__main__":
    main()
