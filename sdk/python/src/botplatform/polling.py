"""Long polling: getUpdates in a loop with offset = the highest update_seq handled plus one.

Updates are handled one at a time, in order; a handler that raises is logged and passed over.
A 429 waits its ``retry_after``; a 409 (another poller took over, e.g. during a restart),
a 5xx or a lost connection backs off exponentially; a webhook being set stops the poller with
:class:`WebhookActiveError`, and a refused token with the UnauthorizedError. ``stop()`` ends
the loop at once, even in the middle of a long poll, after confirming the updates handled so
that a restart does not see them again.
"""

from __future__ import annotations

import asyncio
import logging
import random
import threading
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any, Literal

from ._generated.methods import OPERATIONS
from .errors import BotPlatformError
from .models import Update

if TYPE_CHECKING:
    from .clients import AsyncBotClient, BotClient

__all__ = ["AsyncPoller", "Poller", "PollingConflictError", "WebhookActiveError", "run_polling"]

log = logging.getLogger("botplatform.polling")

UpdateKind = Literal["message", "edited_message", "callback_query", "inline_query"]
ErrorHook = Callable[[BaseException, "Update | None", "float | None"], None]


class WebhookActiveError(Exception):
    """Polling was asked for while the bot has a webhook: getUpdates answers 409 then."""

    def __init__(self, webhook_url: str) -> None:
        super().__init__(
            f"this bot has a webhook ({webhook_url or 'set'}), so getUpdates answers 409 Conflict: a bot "
            "receives updates by webhook or by polling, never both. Remove the webhook first "
            "(bot.delete_webhook(), or DELETE /api/v1/bots/my/{id}/webhook in the console); updates "
            "not yet delivered then become readable by getUpdates."
        )
        self.webhook_url = webhook_url


class PollingConflictError(BotPlatformError):
    """Another getUpdates for the same bot ended ours (409): two instances of the bot are polling."""


def _default_on_error(error: BaseException, update: Update | None, retry_in: float | None) -> None:
    if update is not None:
        log.error("update %s failed: %s", update.update_id, error, exc_info=error)
    else:
        log.warning("getUpdates failed, retrying in %.1f s: %s", retry_in or 0.0, error)


class _Loop:
    """What both pollers share: the offset, and what to do after a failed getUpdates."""

    def __init__(
        self,
        *,
        timeout: int,
        limit: int,
        allowed_updates: Sequence[UpdateKind] | None,
        offset: int | None,
        on_error: ErrorHook | None,
        backoff: float,
        max_backoff: float,
    ) -> None:
        self.timeout = timeout
        self.limit = limit
        self.allowed_updates: Sequence[UpdateKind] | None = allowed_updates
        self.offset = offset
        self.confirmed = offset
        self.on_error = on_error or _default_on_error
        self.backoff = backoff
        self.max_backoff = max_backoff
        self.failures = 0

    def params(self) -> dict[str, Any]:
        return {"offset": self.offset, "limit": self.limit, "timeout": self.timeout,
                "allowed_updates": self.allowed_updates, "tail": None}

    def succeeded(self) -> None:
        self.failures = 0
        self.confirmed = self.offset
        self.allowed_updates = None  # kept by the service once given

    def handled(self, update: Update) -> None:
        self.offset = max(self.offset or 0, update.update_seq + 1)

    def wait_after(self, error: BotPlatformError) -> float:
        """Seconds to wait before polling again; raises what retrying cannot cure."""
        if not (error.retryable or error.error_code == 409):
            raise error
        self.failures += 1
        if error.error_code == 429 and error.retry_after is not None:
            wait = float(error.retry_after)
        else:
            wait = min(self.max_backoff, self.backoff * 2.0 ** (self.failures - 1)) * (0.5 + random.random() / 2)
        shown: BaseException = error
        if error.error_code == 409:
            shown = PollingConflictError(error.description, error_code=409, code="ABORTED", method=error.method)
        self.on_error(shown, None, wait)
        return wait


class Poller:
    """Runs a blocking bot: ``Poller(bot, handle).run()`` until ``stop()`` (from any thread or a signal handler).

    ``handler`` gets each :class:`~botplatform.models.Update`. ``timeout`` is the long-poll wait
    per call (0 to 50 s), ``limit`` the most updates per call, ``offset`` the first update_seq
    wanted (default: whatever the service still holds). ``on_error(error, update, retry_in)``
    is told of a handler that raised (``update`` set) and of a failed call about to be retried
    (``retry_in`` seconds); by default both are logged on the ``botplatform.polling`` logger.
    """

    def __init__(
        self,
        bot: BotClient,
        handler: Callable[[Update], object],
        *,
        timeout: int = 30,
        limit: int = 100,
        allowed_updates: Sequence[UpdateKind] | None = None,
        offset: int | None = None,
        on_error: ErrorHook | None = None,
        backoff: float = 0.5,
        max_backoff: float = 30.0,
    ) -> None:
        self.bot = bot
        self.handler = handler
        self._loop = _Loop(timeout=timeout, limit=limit, allowed_updates=allowed_updates, offset=offset,
                           on_error=on_error, backoff=backoff, max_backoff=max_backoff)
        self._stopped = threading.Event()
        self._in_poll = False
        self._kicker: threading.Thread | None = None

    @property
    def offset(self) -> int | None:
        """The next update_seq to ask for (the highest handled plus one)."""
        return self._loop.offset

    def stop(self) -> None:
        """Ends ``run()``: at once when it is waiting on a long poll, else after the current update."""
        if self._stopped.is_set():
            return
        self._stopped.set()
        if not self._in_poll:
            return  # e.g. from a handler: the loop sees the flag before it polls again
        # A newer getUpdates ends the one waiting (409): send one from another thread, so that
        # stop() returns at once, also from a signal handler (which runs in the polling thread).
        self._kicker = threading.Thread(target=self._kick, args=(self._loop.offset,), daemon=True)
        self._kicker.start()

    def _kick(self, offset: int | None) -> None:
        try:
            self.bot._transport.call(OPERATIONS["get_updates"], {"offset": offset, "limit": 1, "timeout": 0},
                                     list[Update], retries=0)
        except BaseException:  # noqa: BLE001 - best effort: the loop stops anyway
            pass

    def _check_webhook(self) -> None:
        info = self.bot.get_webhook_info()
        if info.url or info.delivery_mode == "webhook":
            raise WebhookActiveError(info.url)

    def run(self) -> None:
        """Polls until ``stop()``; raises WebhookActiveError, or a BotPlatformError retrying cannot cure."""
        loop = self._loop
        self._check_webhook()
        try:
            while True:
                # In this order: a stop() that comes before the flag is set is seen by the check;
                # one that comes after it sends the getUpdates that ends this one.
                self._in_poll = True
                if self._stopped.is_set():
                    break
                try:
                    updates: list[Update] = self.bot._transport.call(
                        OPERATIONS["get_updates"], loop.params(), list[Update], retries=0
                    )
                    loop.succeeded()
                except BotPlatformError as err:
                    if self._stopped.is_set():
                        break
                    if err.error_code == 409:
                        self._check_webhook()
                    self._stopped.wait(loop.wait_after(err))
                    continue
                finally:
                    self._in_poll = False
                for update in updates:
                    if self._stopped.is_set():
                        break
                    try:
                        self.handler(update)
                    except Exception as exc:  # a failed handler does not hold the queue
                        loop.on_error(exc, update, None)
                    loop.handled(update)
        finally:
            self._confirm()

    def _confirm(self) -> None:
        loop = self._loop
        if self._kicker is not None:
            self._kicker.join(10)  # its getUpdates must not end the confirming one
        if loop.offset is None or loop.offset == loop.confirmed:
            return
        try:
            self.bot._transport.call(OPERATIONS["get_updates"], {"offset": loop.offset, "limit": 1, "timeout": 0},
                                     list[Update], retries=1)
            loop.confirmed = loop.offset
        except BotPlatformError as err:
            log.warning("could not confirm the updates handled (they come again on the next start): %s", err)


class AsyncPoller:
    """Runs an asyncio bot: ``await AsyncPoller(bot, handle).run()`` until ``stop()``.

    ``handler`` is a coroutine function taking the update; the options are those of :class:`Poller`.
    """

    def __init__(
        self,
        bot: AsyncBotClient,
        handler: Callable[[Update], Awaitable[object]],
        *,
        timeout: int = 30,
        limit: int = 100,
        allowed_updates: Sequence[UpdateKind] | None = None,
        offset: int | None = None,
        on_error: ErrorHook | None = None,
        backoff: float = 0.5,
        max_backoff: float = 30.0,
    ) -> None:
        self.bot = bot
        self.handler = handler
        self._loop = _Loop(timeout=timeout, limit=limit, allowed_updates=allowed_updates, offset=offset,
                           on_error=on_error, backoff=backoff, max_backoff=max_backoff)
        self._stopped = asyncio.Event()

    @property
    def offset(self) -> int | None:
        """The next update_seq to ask for (the highest handled plus one)."""
        return self._loop.offset

    def stop(self) -> None:
        """Ends ``run()``: at once when it is waiting on a long poll, else after the current update."""
        self._stopped.set()

    async def _until_stopped(self, coro: Awaitable[Any]) -> tuple[bool, Any]:
        """Runs ``coro`` unless stop() comes first (then it is cancelled): (stopped, result)."""
        task = asyncio.ensure_future(coro)
        stop = asyncio.ensure_future(self._stopped.wait())
        try:
            await asyncio.wait({task, stop}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            stop.cancel()
        if not task.done():
            task.cancel()
            try:
                await task
            except (asyncio.CancelledError, Exception):  # noqa: BLE001
                pass
            return True, None
        return False, task.result()

    async def _check_webhook(self) -> None:
        info = await self.bot.get_webhook_info()
        if info.url or info.delivery_mode == "webhook":
            raise WebhookActiveError(info.url)

    async def run(self) -> None:
        """Polls until ``stop()``; raises WebhookActiveError, or a BotPlatformError retrying cannot cure."""
        loop = self._loop
        await self._check_webhook()
        try:
            while not self._stopped.is_set():
                try:
                    stopped, updates = await self._until_stopped(
                        self.bot._transport.call(OPERATIONS["get_updates"], loop.params(), list[Update], retries=0)
                    )
                    if stopped:
                        break
                    loop.succeeded()
                except BotPlatformError as err:
                    if self._stopped.is_set():
                        break
                    if err.error_code == 409:
                        await self._check_webhook()
                    wait = loop.wait_after(err)
                    try:
                        await asyncio.wait_for(self._stopped.wait(), timeout=wait)
                    except asyncio.TimeoutError:
                        pass
                    continue
                for update in updates:
                    if self._stopped.is_set():
                        break
                    try:
                        await self.handler(update)
                    except Exception as exc:  # a failed handler does not hold the queue
                        loop.on_error(exc, update, None)
                    loop.handled(update)
        finally:
            await self._confirm()

    async def _confirm(self) -> None:
        loop = self._loop
        if loop.offset is None or loop.offset == loop.confirmed:
            return
        try:
            await self.bot._transport.call(
                OPERATIONS["get_updates"], {"offset": loop.offset, "limit": 1, "timeout": 0}, list[Update], retries=1
            )
            loop.confirmed = loop.offset
        except BotPlatformError as err:
            log.warning("could not confirm the updates handled (they come again on the next start): %s", err)


def run_polling(bot: BotClient, handler: Callable[[Update], object], **options: Any) -> None:
    """``Poller(bot, handler, **options).run()``, stopped by Ctrl-C (SIGINT) or SIGTERM."""
    import signal

    poller = Poller(bot, handler, **options)
    previous = {}
    if threading.current_thread() is threading.main_thread():
        for sig in (signal.SIGINT, signal.SIGTERM):
            previous[sig] = signal.signal(sig, lambda *_: poller.stop())
    try:
        poller.run()
    finally:
        for sig, handler_before in previous.items():
            signal.signal(sig, handler_before)

