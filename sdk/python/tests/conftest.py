"""The service under test is started by the vitest driver (sdk/test/python.test.ts), which passes
its address and credentials in the environment; every test talks to it over loopback HTTP."""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from botplatform import AdminClient, BotClient, ConsoleClient

ROOT = Path(__file__).resolve().parents[3]


def _env(name: str) -> str:
    value = os.environ.get(name)
    if not value:
        raise RuntimeError(f"{name} is not set: run these tests through sdk/test/python.test.ts (npx vitest run sdk/test/python.test.ts)")
    return value


@dataclass
class Service:
    base_url: str
    developer_jwt: str
    other_jwt: str
    admin_jwt: str
    tls_cert: str
    tls_key: str


@dataclass
class NewBot:
    id: str
    token: str
    username: str
    bot: BotClient


@pytest.fixture(scope="session")
def service() -> Service:
    return Service(
        base_url=_env("BOTPLATFORM_BASE_URL"),
        developer_jwt=_env("BOTPLATFORM_DEVELOPER_JWT"),
        other_jwt=_env("BOTPLATFORM_OTHER_JWT"),
        admin_jwt=_env("BOTPLATFORM_ADMIN_JWT"),
        tls_cert=_env("BOTPLATFORM_TLS_CERT"),
        tls_key=_env("BOTPLATFORM_TLS_KEY"),
    )


@pytest.fixture(scope="session")
def console(service: Service) -> Iterator[ConsoleClient]:
    with ConsoleClient(service.developer_jwt, base_url=service.base_url) as c:
        yield c


@pytest.fixture(scope="session")
def admin(service: Service) -> Iterator[AdminClient]:
    with AdminClient(service.admin_jwt, base_url=service.base_url) as c:
        yield c


def unique(name: str) -> str:
    return f"py_{name}_{uuid.uuid4().hex[:8]}"


def approved(console: ConsoleClient, admin: AdminClient, base_url: str, name: str) -> NewBot:
    username = unique(name)
    created = console.create_application(name=f"Bot {name}", username=username)
    admin.approve_bot(created.id)
    token = console.get_my_bot(created.id).one_time_token
    assert token, "no one_time_token after approval"
    return NewBot(created.id, token, username, BotClient(token, base_url=base_url))


@pytest.fixture
def make_bot(service: Service, console: ConsoleClient, admin: AdminClient) -> Iterator[Callable[[str], NewBot]]:
    made: list[NewBot] = []

    def make(name: str) -> NewBot:
        b = approved(console, admin, service.base_url, name)
        made.append(b)
        return b

    yield make
    for b in made:
        b.bot.close()


Answer = tuple[int, bytes, dict[str, str]]
#: Decides a proxied answer: None passes it on, "drop" closes the connection unanswered, or a replacement.
AnswerHook = Callable[[str, int, bytes], "None | str | Answer"]


@dataclass
class Proxy:
    url: str
    hooks: list[AnswerHook]


@pytest.fixture
def proxy(service: Service) -> Iterator[Proxy]:
    """A loopback HTTP proxy in front of the service whose answers a test can change or drop."""
    import http.server
    import threading

    import httpx

    hooks: list[AnswerHook] = []
    upstream = httpx.Client(timeout=60)

    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def _forward(self) -> None:
            length = int(self.headers.get("content-length") or 0)
            body = self.rfile.read(length) if length else b""
            headers = {k: v for k, v in self.headers.items() if k.lower() not in ("host", "content-length", "connection")}
            res = upstream.request(self.command, service.base_url + self.path, content=body, headers=headers)
            status, content = res.status_code, res.content
            out = {k: v for k, v in res.headers.items() if k.lower() in ("content-type", "retry-after")}
            for hook in hooks:
                decided = hook(self.path, status, content)
                if decided == "drop":
                    self.close_connection = True
                    return
                if isinstance(decided, tuple):
                    status, content, out = decided
            self.send_response(status)
            for k, v in out.items():
                self.send_header(k, v)
            self.send_header("content-length", str(len(content)))
            self.end_headers()
            self.wfile.write(content)

        do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _forward

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield Proxy(f"http://127.0.0.1:{server.server_address[1]}", hooks)
    server.shutdown()
    upstream.close()
