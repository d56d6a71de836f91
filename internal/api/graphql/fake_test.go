package graphql

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/hermes-mq/hermes/internal/broker"
	"github.com/hermes-mq/hermes/internal/broker/brokertest"
)

// fakeEnv serves the GraphQL API over a fake broker.
func fakeEnv(t *testing.T) (*brokertest.Fake, *env) {
	t.Helper()
	f := brokertest.New()
	mux := http.NewServeMux()
	Register(mux, f, slog.New(slog.NewTextHandler(io.Discard, nil)))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return f, &env{t: t, srv: srv}
}

// Every broker error kind reaches the client as its code, with the
// broker's Retriable bit.
func TestFakeErrorKindsMapToCodes(t *testing.T) {
	f, e := fakeEnv(t)
	for _, kind := range []error{broker.ErrInvalidArgument, broker.ErrInvalidTopicName, broker.ErrTopicNotFound,
		broker.ErrTopicExists, broker.ErrPartitionNotFound, broker.ErrMessageTooLarge, broker.ErrCorruptBatch,
		broker.ErrOffsetOutOfRange, broker.ErrResourceExhausted, broker.ErrGroupNotFound, broker.ErrNotAssigned,
		broker.ErrUnknownMember, broker.ErrGroupNotEmpty, broker.ErrPermissionDenied, broker.ErrUnavailable} {
		f.Errs["Topic"] = broker.Errorf(kind, "detail")
		ge := e.fail(`{ topic(name: "t") { name } }`, nil)
		if ge.Extensions["code"] != broker.Code(kind) || ge.Extensions["retriable"] != broker.Retriable(f.Errs["Topic"]) {
			t.Errorf("%v: extensions %v", kind, ge.Extensions)
		}
	}
	f.Errs["Topic"] = errors.New("a bug")
	if ge := e.fail(`{ topic(name: "t") { name } }`, nil); ge.Extensions["code"] != "INTERNAL" {
		t.Errorf("an error of no kind: %v", ge.Extensions)
	}
}

// A publishBatch mutation's records reach the broker as sent.
func TestFakePublishConvertsRecords(t *testing.T) {
	f, e := fakeEnv(t)
	f.CreateTopic(context.Background(), "t", broker.TopicConfig{}, false)
	e.do(`mutation { publishBatch(topic: "t", partition: 0, records: [{key: "k", payload: "hello", headers: [{key: "h", value: "v"}]}, {payload: "again"}]) { offset } }`, nil, nil)
	res, err := f.Fetch(context.Background(), broker.FetchRequest{Topic: "t"})
	if err != nil {
		t.Fatal(err)
	}
	recs, _, _ := broker.DecodeFrom(nil, res.Batches, 0, 0)
	if len(recs) != 2 || string(recs[0].Key) != "k" || string(recs[0].Payload) != "hello" || len(recs[0].Headers) != 1 ||
		recs[0].Headers[0].Key != "h" || string(recs[0].Headers[0].Value) != "v" || recs[1].Key != nil {
		t.Fatalf("the broker got %+v", recs)
	}
}
