"""The HTTP binding of one operation, as the generated table (``_generated/methods.py``) gives it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal


@dataclass(frozen=True)
class Operation:
    """One RPC of the service as the HTTP gateway exposes it."""

    #: The method's Python name, ``"send_message"``.
    name: str
    #: The gRPC method, ``"botplatform.v1.RuntimeService/SendMessage"``.
    rpc: str
    #: ``"runtime"``: answers ``{ok, result}`` (bot token); ``"console"``: the resource (account JWT).
    surface: Literal["runtime", "console"]
    http_method: str
    #: Path template; ``{name}`` is replaced by the parameter of that wire name.
    path: str
    path_params: tuple[str, ...]
    query_params: tuple[str, ...]
    #: ``"*"``: the other parameters are the JSON body; a wire name: that parameter is; ``None``: no body.
    body: str | None
    #: Safe to send again when the answer was lost (reads, and HTTP's idempotent methods).
    idempotent: bool
