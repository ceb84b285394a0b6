// A Go client of the bot platform, on stubs generated from proto/ by protoc-gen-go and
// protoc-gen-go-grpc (see buf.gen.yaml). It walks a bot's life over gRPC, one step
// after the other, and prints a JSON summary of what it saw on stdout (test/polyglot
// asserts on it). On failure it prints {"failed_step", "error"} and exits 1.
//
// Configuration, from the environment (credentials never go on the command line):
//
//	BOTPLATFORM_GRPC_ADDRESS   host:port of the core's gRPC server (plaintext)
//	BOTPLATFORM_DEVELOPER_JWT  an account JWT (console credential)
//	BOTPLATFORM_ADMIN_JWT      an account JWT with the admin role (review)
//	BOTPLATFORM_INTERNAL_TOKEN the internal credential (INTERNAL_API_TOKEN)
//	BOTPLATFORM_USERNAME       the username of the bot to create
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	botplatformv1 "github.com/botplatform/botplatform/gen/go/botplatform/v1"
	"google.golang.org/genproto/googleapis/rpc/code"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// The chat the ingested message comes from, and so the one the bot may answer in.
const chatID = 730_000_001

// session is what the steps share: the clients, the credentials, what earlier steps
// learnt, and the summary being written.
type session struct {
	ctx      context.Context
	console  botplatformv1.ConsoleServiceClient
	admin    botplatformv1.AdminServiceClient
	runtime  botplatformv1.RuntimeServiceClient
	internal botplatformv1.InternalServiceClient

	developerJWT, adminJWT, internalToken, username string

	botID    string
	botToken string
	updateID int64
	summary  map[string]any
}

// with returns the session's context carrying one credential as gRPC metadata.
func (s *session) with(credential string) context.Context {
	return metadata.AppendToOutgoingContext(s.ctx, "authorization", "Bearer "+credential)
}

// A step is one call (or a few) of the walk; it records what a user would observe.
type step struct {
	name string
	run  func(*session) error
}

// The walk, in order. Each step relies only on what the ones before it recorded.
var steps = []step{
	{"create_application", createApplication},
	{"approve", approve},
	{"token", readToken},
	{"get_me", getMe},
	{"ingest", ingest},
	{"streamed_ingest", streamedIngest},
	{"long_poll", longPoll},
	{"send_message", sendMessage},
	{"outbound_feed", outboundFeed},
	{"validation_errors", validationErrors},
}

func createApplication(s *session) error {
	res, err := s.console.CreateApplication(s.with(s.developerJWT), &botplatformv1.CreateApplicationRequest{
		Name: "Polyglot Go", Username: s.username,
	})
	if err != nil {
		return err
	}
	s.botID = res.GetBot().GetId()
	s.summary["created"] = map[string]any{"id": s.botID, "review_status": res.GetBot().GetReviewStatus().String()}
	return nil
}

func approve(s *session) error {
	res, err := s.admin.ApproveBot(s.with(s.adminJWT), &botplatformv1.ApproveBotRequest{Id: s.botID})
	if err != nil {
		return err
	}
	s.summary["approved"] = map[string]any{"review_status": res.GetBot().GetReviewStatus().String()}
	return nil
}

func readToken(s *session) error {
	res, err := s.console.GetMyBot(s.with(s.developerJWT), &botplatformv1.GetMyBotRequest{Id: s.botID})
	if err != nil {
		return err
	}
	s.botToken = res.GetBot().GetOneTimeToken()
	if s.botToken == "" {
		return errors.New("GetMyBot returned no one_time_token")
	}
	// The token itself is a secret: only its public prefix goes in the summary.
	s.summary["token"] = map[string]any{"token_prefix": res.GetBot().GetTokenPrefix(), "has_token": res.GetBot().GetHasToken()}
	return nil
}

func getMe(s *session) error {
	res, err := s.runtime.GetMe(s.with(s.botToken), &botplatformv1.GetMeRequest{})
	if err != nil {
		return err
	}
	me := res.GetResult()
	s.summary["get_me"] = map[string]any{"id": me.GetId(), "username": me.GetUsername(), "is_bot": me.GetIsBot()}
	return nil
}

func ingest(s *session) error {
	res, err := s.internal.IngestUpdates(s.with(s.internalToken), &botplatformv1.IngestUpdatesRequest{
		Updates: []*botplatformv1.IncomingUpdate{{
			BotId: s.botID,
			Message: &botplatformv1.Message{
				Chat: &botplatformv1.Chat{Id: chatID, Type: "private"},
				From: &botplatformv1.User{Id: chatID, FirstName: proto.String("Gopher")},
				Text: proto.String("hello from Go"),
			},
			IdempotencyKey: proto.String("go-1"),
		}},
	})
	if err != nil {
		return err
	}
	r := res.GetResults()[0]
	s.updateID = r.GetUpdateId()
	s.summary["ingest"] = map[string]any{"update_id": r.GetUpdateId(), "update_seq": r.GetUpdateSeq()}
	return nil
}

// streamedIngest sends two batches over one StreamIngestUpdates stream and reads one
// acknowledgement per batch, in order.
func streamedIngest(s *session) error {
	stream, err := s.internal.StreamIngestUpdates(s.with(s.internalToken))
	if err != nil {
		return err
	}
	for seq := int64(1); seq <= 2; seq++ {
		err := stream.Send(&botplatformv1.StreamIngestUpdatesRequest{
			Sequence: seq,
			Updates: []*botplatformv1.IncomingUpdate{{
				BotId: s.botID,
				Message: &botplatformv1.Message{
					Chat: &botplatformv1.Chat{Id: chatID, Type: "private"},
					From: &botplatformv1.User{Id: chatID, FirstName: proto.String("Gopher")},
					Text: proto.String(fmt.Sprintf("streamed %d from Go", seq)),
				},
				IdempotencyKey: proto.String(fmt.Sprintf("go-stream-%d", seq)),
			}},
		})
		if err != nil {
			return err
		}
	}
	if err := stream.CloseSend(); err != nil {
		return err
	}
	acks := []map[string]any{}
	for {
		ack, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return err
		}
		seqs := []int64{}
		for _, r := range ack.GetResults() {
			seqs = append(seqs, r.GetUpdateSeq())
		}
		acks = append(acks, map[string]any{"sequence": ack.GetSequence(), "update_seqs": seqs, "error": ack.GetError() != nil})
	}
	s.summary["streamed_ingest"] = acks
	return nil
}

func longPoll(s *session) error {
	ctx, cancel := context.WithTimeout(s.with(s.botToken), 20*time.Second)
	defer cancel()
	res, err := s.runtime.GetUpdates(ctx, &botplatformv1.GetUpdatesRequest{Offset: proto.Int64(0), Timeout: proto.Int32(10)})
	if err != nil {
		return err
	}
	updates := []map[string]any{}
	for _, u := range res.GetResult() {
		updates = append(updates, map[string]any{
			"update_id": u.GetUpdateId(), "chat_id": u.GetMessage().GetChat().GetId(), "text": u.GetMessage().GetText(),
		})
	}
	s.summary["long_poll"] = map[string]any{"updates": updates}
	return nil
}

func sendMessage(s *session) error {
	res, err := s.runtime.SendMessage(s.with(s.botToken), &botplatformv1.SendMessageRequest{ChatId: chatID, Text: "hello back, from Go"})
	if err != nil {
		return err
	}
	m := res.GetResult()
	s.summary["send_message"] = map[string]any{"message_id": m.GetMessageId(), "chat_id": m.GetChat().GetId(), "text": m.GetText()}
	return nil
}

// outboundFeed reads the outbound feed as a new consumer group (from the start) until
// the message the bot just sent comes by, then commits the group's position.
func outboundFeed(s *session) error {
	group := "polyglot-" + s.username
	ctx, cancel := context.WithTimeout(s.with(s.internalToken), 20*time.Second)
	defer cancel()
	stream, err := s.internal.StreamSentMessages(ctx, &botplatformv1.StreamSentMessagesRequest{Group: group})
	if err != nil {
		return err
	}
	var sent *botplatformv1.SentMessage
	for sent == nil {
		event, err := stream.Recv()
		if err != nil {
			return fmt.Errorf("the feed ended without the sent message: %w", err)
		}
		if m := event.GetMessage(); m != nil && m.GetBotId() == s.botID {
			sent = m
		}
	}
	cancel()
	_, err = s.internal.CommitSentMessages(s.with(s.internalToken), &botplatformv1.CommitSentMessagesRequest{
		Group:     group,
		Positions: []*botplatformv1.FeedPosition{{Partition: sent.GetPartition(), Seq: sent.GetSeq()}},
	})
	if err != nil {
		return err
	}
	s.summary["outbound_feed"] = map[string]any{
		"message_id": sent.GetMessage().GetMessageId(), "chat_id": sent.GetMessage().GetChat().GetId(),
		"text": sent.GetMessage().GetText(), "seq": sent.GetSeq(),
	}
	return nil
}

// validationErrors makes two calls a client author gets wrong and decodes the errors'
// details: a CreateApplication with a bad username and an empty name, and a
// SendMessage with a chat_id of 2^53 (a valid int64, beyond the API's +-(2^53-1)).
func validationErrors(s *session) error {
	_, err := s.console.CreateApplication(s.with(s.developerJWT), &botplatformv1.CreateApplicationRequest{Name: "", Username: "Not Valid"})
	createErr, derr := decodeError(err)
	if derr != nil {
		return derr
	}
	_, err = s.runtime.SendMessage(s.with(s.botToken), &botplatformv1.SendMessageRequest{ChatId: 1 << 53, Text: "too far"})
	sendErr, derr := decodeError(err)
	if derr != nil {
		return derr
	}
	s.summary["validation_errors"] = map[string]any{"create_application": createErr, "send_message": sendErr}
	return nil
}

// decodeError turns a failed call's status into what its details say, through
// status.FromError and Details() (google.rpc.BadRequest, google.rpc.ErrorInfo).
func decodeError(err error) (map[string]any, error) {
	if err == nil {
		return nil, errors.New("the call succeeded, an error was expected")
	}
	st, ok := status.FromError(err)
	if !ok {
		return nil, fmt.Errorf("not a gRPC status: %w", err)
	}
	out := map[string]any{"code": code.Code_name[int32(st.Code())], "message": st.Message()}
	violations := []map[string]any{}
	infos := []map[string]any{}
	for _, d := range st.Details() {
		switch detail := d.(type) {
		case *errdetails.BadRequest:
			for _, v := range detail.GetFieldViolations() {
				violations = append(violations, map[string]any{"field": v.GetField(), "reason": v.GetReason(), "description": v.GetDescription()})
			}
		case *errdetails.ErrorInfo:
			md := map[string]string{}
			for k, v := range detail.GetMetadata() {
				md[k] = v
			}
			infos = append(infos, map[string]any{"reason": detail.GetReason(), "domain": detail.GetDomain(), "metadata": md})
		case error:
			return nil, fmt.Errorf("a detail did not decode: %w", detail)
		}
	}
	out["field_violations"] = violations
	out["error_info"] = infos
	return out, nil
}

func main() {
	env := func(name string) string {
		v := os.Getenv(name)
		if v == "" {
			fail("config", fmt.Errorf("%s is not set", name))
		}
		return v
	}
	conn, err := grpc.NewClient(env("BOTPLATFORM_GRPC_ADDRESS"), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		fail("connect", err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	s := &session{
		ctx:           ctx,
		console:       botplatformv1.NewConsoleServiceClient(conn),
		admin:         botplatformv1.NewAdminServiceClient(conn),
		runtime:       botplatformv1.NewRuntimeServiceClient(conn),
		internal:      botplatformv1.NewInternalServiceClient(conn),
		developerJWT:  env("BOTPLATFORM_DEVELOPER_JWT"),
		adminJWT:      env("BOTPLATFORM_ADMIN_JWT"),
		internalToken: env("BOTPLATFORM_INTERNAL_TOKEN"),
		username:      env("BOTPLATFORM_USERNAME"),
		summary:       map[string]any{},
	}
	for _, st := range steps {
		if err := st.run(s); err != nil {
			fail(st.name, err)
		}
	}
	s.summary["steps"] = stepNames()
	if err := json.NewEncoder(os.Stdout).Encode(s.summary); err != nil {
		fail("output", err)
	}
}

func stepNames() []string {
	names := make([]string, len(steps))
	for i, st := range steps {
		names[i] = st.name
	}
	return names
}

func fail(stepName string, err error) {
	_ = json.NewEncoder(os.Stdout).Encode(map[string]string{"failed_step": stepName, "error": err.Error()})
	os.Exit(1)
}
