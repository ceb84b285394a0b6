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
