"""What every example reads from the environment."""

from __future__ import annotations

import os
import sys


def bot_settings(name: str) -> tuple[str, str]:
    """(token, base_url) from BOT_TOKEN and BASE_URL; exits saying what to set when BOT_TOKEN is missing."""
    token = os.environ.get("BOT_TOKEN", "")
    if not token:
        print(f"{name}: set BOT_TOKEN to the bot's token (sbot_..., shown once as one_time_token after approval)",
              file=sys.stderr)
        raise SystemExit(2)
    return token, os.environ.get("BASE_URL", "http://127.0.0.1:8080")


def log(name: str, line: str) -> None:
    print(f"{name}: {line}", flush=True)
