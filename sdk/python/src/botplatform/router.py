"""Routing updates to handlers (asyncio), as bot frameworks do, like the TypeScript SDK's router.

Commands (``/start``, ``/help@my_bot args``) come from the message's ``bot_command`` entity at
offset 0; callback queries are matched by their data (a string or a compiled regular
expression); ``on(kind)`` takes any update of a kind. Handlers are tried in the order they
were registered and the first that matches takes the update. ``router.handle_update`` is an
update handler: pass it to :class:`~botplatform.AsyncPoller`, or call it from a webhook
receiver; ``router.run_polling()`` does the former.

    router = Router(AsyncBotClient(token, base_url=BASE))

    @router.command("start")
    async def start(ctx: CommandContext) -> None:
        await ctx.reply("Hi!", reply_markup=inline_keyboard([[{"text": "Yes", "callback_data": "yes"}]]))

    @router.callback_query("yes")
    async def yes(ctx: CallbackQueryContext) -> None:
        await ctx.edit_message_text("You said yes")

    await router.run_polling()
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, TypeVar

from .clients import AsyncBotClient
from .models import CallbackQuery, Chat, InlineQuery, Message, MessageEntity, ReplyMarkup, Update, User
from .polling import AsyncPoller

__all__ = [
    "CallbackQueryContext",
    "CommandContext",
    "Context",
    "InlineQueryContext",
    "ParsedCommand",
    "Router",
    "inline_keyboard",
    "parse_command",
]

UpdateKind = Literal["message", "edited_message", "callback_query", "inline_query"]
Markup = ReplyMarkup | Mapping[str, Any]


class Context:
    """What a handler may do with the update it was given."""

    def __init__(self, update: Update, api: AsyncBotClient) -> None:
        #: The update.
        self.update = update
        #: The bot's client, for any call.
        self.api = api

    @property
    def message(self) -> Message | None:
        """The new or edited message, or the message whose button was pressed."""
        u = self.update
        return u.message or u.edited_message or (u.callback_query.message if u.callback_query else None)

    @property
    def chat(self) -> Chat | None:
        """The chat the update happened in, when it has one (an inline query has none)."""
        return self.message.chat if self.message else None

    @property
    def from_user(self) -> User | None:
        """Who sent the message, pressed the button or typed the inline query."""
        u = self.update
        for source in (u.callback_query, u.inline_query, u.message, u.edited_message):
            if source is not None and source.from_ is not None:
                return source.from_
        return None

    async def reply(
        self,
        text: str,
        *,
        parse_mode: str | None = None,
        entities: Sequence[MessageEntity | Mapping[str, Any]] | None = None,
        reply_markup: Markup | None = None,
        reply_to_message_id: int | None = None,
    ) -> Message:
        """Sends a message to the update's chat."""
        return await self.api.send_message(
            chat_id=self._chat_id("reply"), text=text, parse_mode=parse_mode, entities=entities,
            reply_markup=reply_markup, reply_to_message_id=reply_to_message_id,
        )

    async def send_chat_action(self, action: str) -> bool:
        """Shows an action ("typing", "upload_photo"...) in the update's chat, for at most 5 seconds."""
        return await self.api.send_chat_action(chat_id=self._chat_id("send_chat_action"), action=action)

    def _chat_id(self, what: str) -> int:
        chat = self.chat
        if chat is None:
            raise TypeError(f"{what}: this update has no chat")
        return chat.id


class CommandContext(Context):
    """A command's context: the command's name and what follows it."""

    def __init__(self, update: Update, api: AsyncBotClient, command: str, args: str) -> None:
        super().__init__(update, api)
        #: The command without its slash and @username, e.g. ``"start"``.
        self.command = command
        #: The text after the command, leading white space removed (``""`` when none).
        self.args = args


class CallbackQueryContext(Context):
    """A callback query's context: its data, the regular expression's match, answer and edit helpers."""

    def __init__(self, update: Update, api: AsyncBotClient, match: re.Match[str] | None) -> None:
        super().__init__(update, api)
        #: The match of the data, for a regular expression pattern (None for a string).
        self.match = match
        self.answered = False

    @property
    def callback_query(self) -> CallbackQuery:
        assert self.update.callback_query is not None
        return self.update.callback_query

    @property
    def data(self) -> str:
        """The pressed button's callback_data."""
        return self.callback_query.data or ""

    async def answer(
        self, text: str | None = None, *, show_alert: bool | None = None, url: str | None = None,
        cache_time: int | None = None,
    ) -> bool:
        """Answers the query (a notification, an alert, or nothing): the user's client stops waiting."""
        self.answered = True
        return await self.api.answer_callback_query(
            callback_query_id=self.callback_query.id, text=text, show_alert=show_alert, url=url, cache_time=cache_time,
        )

    async def edit_message_text(
        self, text: str, *, parse_mode: str | None = None,
        entities: Sequence[MessageEntity | Mapping[str, Any]] | None = None, reply_markup: Markup | None = None,
    ) -> Message:
        """Replaces the text (and keyboard: left out, it is removed, as Telegram does) of the message whose button was pressed."""
        chat_id, message_id = self._target("edit_message_text")
        return await self.api.edit_message_text(chat_id=chat_id, message_id=message_id, text=text,
                                                parse_mode=parse_mode, entities=entities, reply_markup=reply_markup)

    async def edit_message_reply_markup(self, reply_markup: Markup | None = None) -> Message:
        """Replaces (or, left out, removes) the keyboard of the message whose button was pressed."""
        chat_id, message_id = self._target("edit_message_reply_markup")
        return await self.api.edit_message_reply_markup(chat_id=chat_id, message_id=message_id, reply_markup=reply_markup)

    def _target(self, what: str) -> tuple[int, int]:
        m = self.callback_query.message
        if m is None or m.chat is None:
            raise TypeError(f"{what}: the callback query carries no message")
        return m.chat.id, m.message_id


class InlineQueryContext(Context):
    """An inline query's context."""

    @property
    def inline_query(self) -> InlineQuery:
        assert self.update.inline_query is not None
        return self.update.inline_query


@dataclass(frozen=True)
class ParsedCommand:
    """A command found at the start of a message."""

    command: str
    #: The @username after the command, when given (``/start@my_bot``).
    username: str | None
    args: str


def parse_command(message: Message) -> ParsedCommand | None:
    """The command a message (or a caption) starts with: its ``bot_command`` entity at offset 0.

    Entity offsets and lengths count UTF-16 code units, as Telegram's do.
    """
    if message.text is not None:
        text, entities = message.text, message.entities
    elif message.caption is not None:
        text, entities = message.caption, message.caption_entities
    else:
        return None
    entity = next((e for e in entities or [] if e.type == "bot_command" and not e.offset), None)
    length = entity.length or 0 if entity else 0
    if length < 2:
        return None
    units = text.encode("utf-16-le")
    head = units[: 2 * length].decode("utf-16-le", errors="replace")
    rest = units[2 * length :].decode("utf-16-le", errors="replace")
    command, _, username = head[1:].partition("@")
    return ParsedCommand(command=command, username=username or None, args=rest.lstrip())


def inline_keyboard(rows: Sequence[Sequence[Mapping[str, Any]]]) -> dict[str, Any]:
    """A native inline keyboard from rows of buttons, as Telegram writes them.

    ``inline_keyboard([[{"text": "Yes", "callback_data": "yes"}]])``
    """
    return {"inline_keyboard": [{"buttons": [dict(b) for b in row]} for row in rows]}


H = TypeVar("H", bound=Callable[..., Awaitable[object]])
_Route = tuple[UpdateKind, Callable[[Update], Awaitable[bool]]]


class Router:
    """Handlers in the order they were registered; an update goes to the first that matches.

    ``username`` is the bot's (so that ``/start@other_bot`` in a group is left to the other
    bot); by default ``get_me`` tells it, once, the first time a command names a bot. A
    callback query the handler left unanswered is answered once it returns
    (``auto_answer_callback_queries``), so the user's client stops waiting.
    """

    def __init__(self, api: AsyncBotClient, *, username: str | None = None, auto_answer_callback_queries: bool = True) -> None:
        self.api = api
        self._username = username
        self._auto_answer = auto_answer_callback_queries
        self._routes: list[_Route] = []
        #: The poller of run_polling(), while it runs.
        self.poller: AsyncPoller | None = None

    def command(self, *names: str) -> Callable[[Callable[[CommandContext], Awaitable[object]]], Callable[[CommandContext], Awaitable[object]]]:
        """Decorates the handler of messages (and captions) starting with one of the commands."""
        wanted = {n.lstrip("/") for n in names}

        def register(handler: Callable[[CommandContext], Awaitable[object]]) -> Callable[[CommandContext], Awaitable[object]]:
            async def run(update: Update) -> bool:
                parsed = parse_command(update.message) if update.message else None
                if parsed is None or parsed.command not in wanted:
                    return False
                if parsed.username and not await self._is_own_username(parsed.username):
                    return False
                await handler(CommandContext(update, self.api, parsed.command, parsed.args))
                return True

            self._routes.append(("message", run))
            return handler

        return register

    def callback_query(
        self, *patterns: str | re.Pattern[str]
    ) -> Callable[[Callable[[CallbackQueryContext], Awaitable[object]]], Callable[[CallbackQueryContext], Awaitable[object]]]:
        """Decorates the handler of presses of buttons whose callback_data equals a string or matches a pattern."""

        def register(
            handler: Callable[[CallbackQueryContext], Awaitable[object]],
        ) -> Callable[[CallbackQueryContext], Awaitable[object]]:
            async def run(update: Update) -> bool:
                data = update.callback_query.data if update.callback_query else None
                if data is None:
                    return False
                for p in patterns:
                    match = p.search(data) if isinstance(p, re.Pattern) else None
                    if match is not None or p == data:
                        await self._run_callback(handler, CallbackQueryContext(update, self.api, match))
                        return True
                return False

            self._routes.append(("callback_query", run))
            return handler

        return register

    def on(self, kind: UpdateKind) -> Callable[[H], H]:
        """Decorates the handler of every update of a kind that no earlier handler took.

        The handler gets a :class:`CallbackQueryContext` for ``callback_query``, an
        :class:`InlineQueryContext` for ``inline_query``, a :class:`Context` otherwise.
        """

        def register(handler: H) -> H:
            async def run(update: Update) -> bool:
                if getattr(update, kind) is None:
                    return False
                if kind == "callback_query":
                    await self._run_callback(handler, CallbackQueryContext(update, self.api, None))
                elif kind == "inline_query":
                    await handler(InlineQueryContext(update, self.api))
                else:
                    await handler(Context(update, self.api))
                return True

            self._routes.append((kind, run))
            return handler

        return register

    async def handle_update(self, update: Update) -> bool:
        """Runs the first matching handler; returns whether one took the update (raises what it raised)."""
        for kind, run in self._routes:
            if getattr(update, kind) is not None and await run(update):
                return True
        return False

    async def run_polling(self, **options: Any) -> None:
        """Long-polls (:class:`~botplatform.AsyncPoller`, same options) and hands each update to the router."""
        self.poller = AsyncPoller(self.api, self.handle_update, **options)
        try:
            await self.poller.run()
        finally:
            self.poller = None

    def stop(self) -> None:
        """Stops run_polling() (see AsyncPoller.stop)."""
        if self.poller is not None:
            self.poller.stop()

    async def _run_callback(self, handler: Callable[..., Awaitable[object]], ctx: CallbackQueryContext) -> None:
        await handler(ctx)
        if not ctx.answered and self._auto_answer:
            await ctx.answer()

    async def _is_own_username(self, name: str) -> bool:
        if self._username is None:
            self._username = (await self.api.get_me()).username
        return self._username.lower() == name.lower()
