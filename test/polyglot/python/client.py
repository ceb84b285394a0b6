"""A Python client of the bot platform, on stubs generated from proto/ by grpcio-tools.

It walks a bot's life over gRPC, one step after the other, and prints a JSON summary of
what it saw on stdout (test/polyglot asserts on it). On failure it prints
{"failed_step", "error"} and exits 1.

The stubs are generated first (from the repository root, into the gitignored gen/ here):

    python -m grpc_tools.protoc -I proto --python_out=test/polyglot/python/gen \
        --pyi_out=test/polyglot/python/gen --grpc_python_out=test/polyglot/python/gen \
        proto/botplatform/v1/*.proto

google/api and google/rpc come from googleapis-common-protos, so only botplatform/ is
generated. Configuration, from the environment (credentials never go on the command line):

    BOTPLATFORM_GRPC_ADDRESS   host:port of the core's gRPC server (plaintext)
    BOTPLATFORM_DEVELOPER_JWT  an account JWT (console credential)
    BOTPLATFORM_ADMIN_JWT      an account JWT with the admin role (review)
    BOTPLATFORM_INTERNAL_TOKEN the internal credential (INTERNAL_API_TOKEN)
    BOTPLATFORM_USERNAME       the username of the bot to create
"""

import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "gen"))

import grpc  # noqa: E402
from google.rpc import error_details_pb2  # noqa: E402
from grpc_status import rpc_status  # noqa: E402

from botplatform.v1 import (  # noqa: E402
    admin_service_pb2,
    admin_service_pb2_grpc,
    console_service_pb2,
    console_service_pb2_grpc,
    internal_service_pb2,
    internal_service_pb2_grpc,
    runtime_service_pb2,
    runtime_service_pb2_grpc,
    update_pb2,
)
from botplatform.v1.bot_pb2 import ReviewStatus  # noqa: E402

# The chat the ingested message comes from, and so the one the bot may answer in.
CHAT_ID = 740_000_001
# Every call gives up after this many seconds.
DEADLINE = 20


class Session:
    """What the steps share: the stubs, the credentials, what earlier steps learnt, and the summary."""

    def __init__(self, channel, env):
        self.console = console_service_pb2_grpc.ConsoleServiceStub(channel)
        self.admin = admin_service_pb2_grpc.AdminServiceStub(channel)
        self.runtime = runtime_service_pb2_grpc.RuntimeServiceStub(channel)
        self.internal = internal_service_pb2_grpc.InternalServiceStub(channel)
        self.developer_jwt = env["BOTPLATFORM_DEVELOPER_JWT"]
        self.admin_jwt = env["BOTPLATFORM_ADMIN_JWT"]
        self.internal_token = env["BOTPLATFORM_INTERNAL_TOKEN"]
        self.username = env["BOTPLATFORM_USERNAME"]
        self.bot_id = None
        self.bot_token = None
        self.update_id = None
        self.summary = {}

    @staticmethod
    def auth(credential):
        """Call options carrying one credential as gRPC metadata."""
        return {"metadata": (("authorization", f"Bearer {credential}"),), "timeout": DEADLINE}


def create_application(s):
    res = s.console.CreateApplication(
        console_service_pb2.CreateApplicationRequest(name="Polyglot Python", username=s.username),
        **s.auth(s.developer_jwt),
    )
    s.bot_id = res.bot.id
    s.summary["created"] = {"id": res.bot.id, "review_status": ReviewStatus.Name(res.bot.review_status)}


def approve(s):
    res = s.admin.ApproveBot(admin_service_pb2.ApproveBotRequest(id=s.bot_id), **s.auth(s.admin_jwt))
    s.summary["approved"] = {"review_status": ReviewStatus.Name(res.bot.review_status)}


def read_token(s):
    res = s.console.GetMyBot(console_service_pb2.GetMyBotRequest(id=s.bot_id), **s.auth(s.developer_jwt))
    if not res.bot.HasField("one_time_token"):
        raise RuntimeError("GetMyBot returned no one_time_token")
    s.bot_token = res.bot.one_time_token
    # The token itself is a secret: only its public prefix goes in the summary.
    s.summary["token"] = {"token_prefix": res.bot.token_prefix, "has_token": res.bot.has_token}


def get_me(s):
    me = s.runtime.GetMe(runtime_service_pb2.GetMeRequest(), **s.auth(s.bot_token)).result
    s.summary["get_me"] = {"id": me.id, "username": me.username, "is_bot": me.is_bot}


def ingest(s):
    message = update_pb2.Message(
        chat=update_pb2.Chat(id=CHAT_ID, type="private"),
        text="hello from Python",
        **{"from": update_pb2.User(id=CHAT_ID, first_name="Pythonista")},  # `from` is a Python keyword
    )
    res = s.internal.IngestUpdates(
        internal_service_pb2.IngestUpdatesRequest(
            updates=[internal_service_pb2.IncomingUpdate(bot_id=s.bot_id, message=message, idempotency_key="py-1")]
        ),
        **s.auth(s.internal_token),
    )
    result = res.results[0]
    s.update_id = result.update_id
    s.summary["ingest"] = {"update_id": result.update_id, "update_seq": result.update_seq}


def streamed_ingest(s):
    """Two batches over one StreamIngestUpdates stream, one acknowledgement each, in order."""

    def batches():
        for sequence in (1, 2):
            message = update_pb2.Message(
                chat=update_pb2.Chat(id=CHAT_ID, type="private"),
                text=f"streamed {sequence} from Python",
                **{"from": update_pb2.User(id=CHAT_ID, first_name="Pythonista")},
            )
            yield internal_service_pb2.StreamIngestUpdatesRequest(
                sequence=sequence,
                updates=[internal_service_pb2.IncomingUpdate(bot_id=s.bot_id, message=message, idempotency_key=f"py-stream-{sequence}")],
            )

    acks = s.internal.StreamIngestUpdates(batches(), **s.auth(s.internal_token))
    s.summary["streamed_ingest"] = [
        {"sequence": a.sequence, "update_seqs": [r.update_seq for r in a.results], "error": a.HasField("error")} for a in acks
    ]


def long_poll(s):
    res = s.runtime.GetUpdates(runtime_service_pb2.GetUpdatesRequest(offset=0, timeout=10), **s.auth(s.bot_token))
    s.summary["long_poll"] = {
        "updates": [
            {"update_id": u.update_id, "chat_id": u.message.chat.id, "text": u.message.text} for u in res.result
        ]
    }


def send_message(s):
    m = s.runtime.SendMessage(
        runtime_service_pb2.SendMessageRequest(chat_id=CHAT_ID, text="hello back, from Python"), **s.auth(s.bot_token)
    ).result
    s.summary["send_message"] = {"message_id": m.message_id, "chat_id": m.chat.id, "text": m.text}


def outbound_feed(s):
    """The outbound feed (a new consumer group reads from the start) carries the message
    the bot just sent; the group then commits its position."""
    group = f"polyglot-{s.username}"
    call = s.internal.StreamSentMessages(
        internal_service_pb2.StreamSentMessagesRequest(group=group), **s.auth(s.internal_token)
    )
    sent = None
    try:
        for event in call:
            if event.WhichOneof("event") == "message" and event.message.bot_id == s.bot_id:
                sent = event.message
                break
    finally:
        call.cancel()
    if sent is None:
        raise RuntimeError("the feed ended without the sent message")
    s.internal.CommitSentMessages(
        internal_service_pb2.CommitSentMessagesRequest(
            group=group, positions=[internal_service_pb2.FeedPosition(partition=sent.partition, seq=sent.seq)]
        ),
        **s.auth(s.internal_token),
    )
    s.summary["outbound_feed"] = {
        "message_id": sent.message.message_id,
        "chat_id": sent.message.chat.id,
        "text": sent.message.text,
        "seq": sent.seq,
    }


def validation_errors(s):
    """Two calls a client author gets wrong, with their errors' details decoded: a
    CreateApplication with a bad username and an empty name, and a SendMessage with a
    chat_id of 2**53 (a valid int64, beyond the API's +-(2**53-1))."""
    create = expect_error(
        lambda: s.console.CreateApplication(
            console_service_pb2.CreateApplicationRequest(name="", username="Not Valid"), **s.auth(s.developer_jwt)
        )
    )
    send = expect_error(
        lambda: s.runtime.SendMessage(
            runtime_service_pb2.SendMessageRequest(chat_id=2**53, text="too far"), **s.auth(s.bot_token)
        )
    )
    s.summary["validation_errors"] = {"create_application": create, "send_message": send}


def expect_error(call):
    try:
        call()
    except grpc.RpcError as err:
        return decode_error(err)
    raise RuntimeError("the call succeeded, an error was expected")


def decode_error(err):
    """What a failed call's details say: grpc-status-details-bin through grpcio-status,
    unpacked into google.rpc.BadRequest and google.rpc.ErrorInfo."""
    status = rpc_status.from_call(err)
    if status is None:
        raise RuntimeError(f"no status details: {err.code().name}: {err.details()}")
    out = {"code": err.code().name, "message": status.message, "field_violations": [], "error_info": []}
    for detail in status.details:
        if detail.Is(error_details_pb2.BadRequest.DESCRIPTOR):
            bad = error_details_pb2.BadRequest()
            detail.Unpack(bad)
            out["field_violations"] += [
                {"field": v.field, "reason": v.reason, "description": v.description} for v in bad.field_violations
            ]
        elif detail.Is(error_details_pb2.ErrorInfo.DESCRIPTOR):
            info = error_details_pb2.ErrorInfo()
            detail.Unpack(info)
            out["error_info"].append({"reason": info.reason, "domain": info.domain, "metadata": dict(info.metadata)})
    return out


# The walk, in order. Each step relies only on what the ones before it recorded.
STEPS = [
    ("create_application", create_application),
    ("approve", approve),
    ("token", read_token),
    ("get_me", get_me),
    ("ingest", ingest),
    ("streamed_ingest", streamed_ingest),
    ("long_poll", long_poll),
    ("send_message", send_message),
    ("outbound_feed", outbound_feed),
    ("validation_errors", validation_errors),
]


def main():
    step = "config"
    try:
        env = {k: v for k, v in os.environ.items() if k.startswith("BOTPLATFORM_")}
        for name in ("BOTPLATFORM_GRPC_ADDRESS", "BOTPLATFORM_DEVELOPER_JWT", "BOTPLATFORM_ADMIN_JWT",
                     "BOTPLATFORM_INTERNAL_TOKEN", "BOTPLATFORM_USERNAME"):
            if not env.get(name):
                raise RuntimeError(f"{name} is not set")
        with grpc.insecure_channel(env["BOTPLATFORM_GRPC_ADDRESS"]) as channel:
            s = Session(channel, env)
            for step, run in STEPS:
                run(s)
        s.summary["steps"] = [name for name, _ in STEPS]
        print(json.dumps(s.summary))
    except Exception as err:  # noqa: BLE001: reported as the failed step
        detail = f"{err.code().name}: {err.details()}" if isinstance(err, grpc.RpcError) else str(err)
        print(json.dumps({"failed_step": step, "error": detail}))
        sys.exit(1)


if __name__ == "__main__":
    main()
