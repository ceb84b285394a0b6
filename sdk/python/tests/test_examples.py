"""The example bots as a user runs them (python examples/NAME.py) against the running service:
each answers injected test updates and stops cleanly on SIGTERM."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from conftest import NewBot, Service

from botplatform import ConsoleClient

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


class Running:
    def __init__(self, name: str, env: dict[str, str]) -> None:
        full_env = {**os.environ, **env,
                    "PYTHONPATH": os.pathsep.join([str(EXAMPLES.parent / "src"), os.environ.get("PYTHONPATH", "")])}
        self.proc = subprocess.Popen([sys.executable, str(EXAMPLES / f"{name}.py")], env=full_env,
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        self.lines: list[str] = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout
        for line in self.proc.stdout:
            self.lines.append(line)

    def output(self) -> str:
        return "".join(self.lines)

    def wait_for(self, pattern: str, timeout: float = 20) -> re.Match[str]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            found = re.search(pattern, self.output())
            if found:
                return found
            if self.proc.poll() is not None:
                time.sleep(0.1)
                break
            time.sleep(0.05)
        raise AssertionError(f"no {pattern!r} in the example's output:\n{self.output()}")

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(10)


@pytest.fixture
def run_example() -> Iterator[Callable[[str, dict[str, str]], Running]]:
    started: list[Running] = []

    def start(name: str, env: dict[str, str]) -> Running:
        r = Running(name, env)
        started.append(r)
        return r

    yield start
    for r in started:
        if r.proc.poll() is None:
            r.proc.kill()
            r.proc.wait()


def test_echo_polling(service: Service, make_bot: Callable[[str], NewBot], console: ConsoleClient,
                      run_example: Callable[[str, dict[str, str]], Running]) -> None:
    b = make_bot("ex_polling")
    r = run_example("echo_polling", {"BOT_TOKEN": b.token, "BASE_URL": service.base_url})
    r.wait_for(rf"@{b.username} is polling")
    sent = console.create_test_update(b.id, text="hello polling", chat_id=8100)
    r.wait_for(rf"update {sent.update_id} \(seq 1\) from chat 8100: hello polling")
    r.wait_for(r"replied with message \d+ in chat 8100")
    started = time.monotonic()
    assert r.stop() == 0 and time.monotonic() - started < 8
    assert "echo-polling: stopped" in r.output()
    assert b.bot.get_updates(timeout=0) == []  # confirmed before it stopped


def test_echo_webhook_over_https(service: Service, make_bot: Callable[[str], NewBot], console: ConsoleClient,
                                 run_example: Callable[[str, dict[str, str]], Running]) -> None:
    b = make_bot("ex_webhook")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    r = run_example("echo_webhook", {"BOT_TOKEN": b.token, "BASE_URL": service.base_url, "PORT": str(port),
                                     "TLS_CERT": service.tls_cert, "TLS_KEY": service.tls_key})
    r.wait_for(rf"@{b.username} receives by webhook at https://127\.0\.0\.1:{port}/webhook")
    info = b.bot.get_webhook_info()
    assert (info.url, info.delivery_mode) == (f"https://127.0.0.1:{port}/webhook", "webhook")
    sent = console.create_test_update(b.id, text="hello webhook", chat_id=8200)
    r.wait_for(rf"update {sent.update_id} \(seq 1\) from chat 8200: hello webhook")
    r.wait_for(r"replied with message \d+ in chat 8200")
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        deliveries = console.list_deliveries(b.id).items
        if deliveries and deliveries[0].status == "succeeded":
            break
        time.sleep(0.1)
    assert (deliveries[0].update_id, deliveries[0].status, deliveries[0].attempts) == (sent.update_id, "succeeded", 1)
    assert r.stop() == 0


def test_file_bot_uploads_then_reuses(service: Service, make_bot: Callable[[str], NewBot], console: ConsoleClient,
                                      run_example: Callable[[str, dict[str, str]], Running]) -> None:
    b = make_bot("ex_files")
    r = run_example("file_bot", {"BOT_TOKEN": b.token, "BASE_URL": service.base_url})
    r.wait_for(rf"@{b.username} is polling")
    words = f"the same words {uuid.uuid4()}"  # never uploaded before: the first answer uploads it
    first = console.create_test_update(b.id, text=words, chat_id=8300)
    r.wait_for(rf"update {first.update_id}: sent file_\S+ by upload as message \d+ in chat 8300; downloaded back intact")
    second = console.create_test_update(b.id, text=words, chat_id=8300)
    r.wait_for(rf"update {second.update_id}: sent file_\S+ by reuse as message \d+ in chat 8300; downloaded back intact")
    assert r.stop() == 0


def test_keyboard_bot_with_the_router(service: Service, make_bot: Callable[[str], NewBot], console: ConsoleClient,
                                       run_example: Callable[[str, dict[str, str]], Running]) -> None:
    b = make_bot("ex_keyboard")
    r = run_example("keyboard", {"BOT_TOKEN": b.token, "BASE_URL": service.base_url})
    r.wait_for(rf"@{b.username} is polling")
    console.create_test_update(b.id, text="/start", chat_id=8400)
    sent = int(r.wait_for(r"/start in chat 8400: sent message (\d+) with a keyboard")[1])
    console.create_test_callback_query(b.id, message_id=sent, callback_data="count:1", chat_id=8400)
    r.wait_for(rf"pressed count:1 on message {sent}: count 1")
    console.create_test_callback_query(b.id, message_id=sent, callback_data="count:0", chat_id=8400)
    r.wait_for(rf"pressed count:0 on message {sent}: count 0")
    assert [c.command for c in b.bot.get_my_commands()] == ["start", "help"]
    assert r.stop() == 0 and "keyboard: stopped" in r.output()


def test_an_example_without_bot_token_says_what_to_set(run_example: Callable[[str, dict[str, str]], Running]) -> None:
    r = run_example("echo_polling", {"BOT_TOKEN": ""})
    assert r.proc.wait(20) == 2
    time.sleep(0.1)
    assert "set BOT_TOKEN" in r.output()
