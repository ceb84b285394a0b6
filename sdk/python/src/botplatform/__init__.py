"""botplatform: the official Python SDK of the bot platform.

Clients of the runtime, console and admin APIs (blocking and asyncio, on httpx), long polling,
webhook verification and the file flow. See README.md, or ``help(botplatform.BotClient)``.
"""

from ._transport import DEFAULT_TIMEOUT, LONG_POLL_MARGIN, __version__
from .clients import (
    AdminClient,
    AsyncAdminClient,
    AsyncBotClient,
    AsyncConsoleClient,
    BotClient,
    ConsoleClient,
)
from .errors import (
    BadRequestError,
    BotPlatformError,
    ConflictError,
    ErrorDetail,
    ForbiddenError,
    NetworkError,
    NotFoundError,
    PayloadTooLargeError,
    ServerError,
    TooManyRequestsError,
    UnauthorizedError,
    UnexpectedResponseError,
)
from .files import UploadedFile
from .models import Bot, File, Message, Update
from .polling import AsyncPoller, Poller, PollingConflictError, WebhookActiveError, run_polling
from .webhook import (
    DEFAULT_TOLERANCE_SECONDS,
    SIGNATURE_HEADER,
    TIMESTAMP_HEADER,
    UPDATE_ID_HEADER,
    WebhookBodyError,
    WebhookInvalidTimestampError,
    WebhookMissingHeaderError,
    WebhookSignatureError,
    WebhookTimestampError,
    WebhookUpdateIdMismatchError,
    WebhookVerificationError,
    sign_webhook,
    verify_webhook,
)

__all__ = [
    "DEFAULT_TIMEOUT",
    "DEFAULT_TOLERANCE_SECONDS",
    "LONG_POLL_MARGIN",
    "SIGNATURE_HEADER",
    "TIMESTAMP_HEADER",
    "UPDATE_ID_HEADER",
    "AdminClient",
    "AsyncAdminClient",
    "AsyncBotClient",
    "AsyncConsoleClient",
    "AsyncPoller",
    "BadRequestError",
    "Bot",
    "BotClient",
    "BotPlatformError",
    "ConflictError",
    "ConsoleClient",
    "ErrorDetail",
    "File",
    "ForbiddenError",
    "Message",
    "NetworkError",
    "NotFoundError",
    "PayloadTooLargeError",
    "Poller",
    "PollingConflictError",
    "ServerError",
    "TooManyRequestsError",
    "UnauthorizedError",
    "UnexpectedResponseError",
    "Update",
    "UploadedFile",
    "WebhookActiveError",
    "WebhookBodyError",
    "WebhookInvalidTimestampError",
    "WebhookMissingHeaderError",
    "WebhookSignatureError",
    "WebhookTimestampError",
    "WebhookUpdateIdMismatchError",
    "WebhookVerificationError",
    "__version__",
    "run_polling",
    "sign_webhook",
    "verify_webhook",
]
