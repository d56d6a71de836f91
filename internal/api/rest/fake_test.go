package rest

import (
	"bufio"
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/hermes-mq/hermes/internal/broker"
	"github.com/hermes-mq/hermes/internal/broker/brokertest"
	"github.com/hermes-mq/hermes/pkg/record"
)

// fakeEnv serves the REST API over a fake broker.
func fakeEnv(t *testing.T) (*brokertest.Fake, *env) {
	t.Helper()
	f := brokertest.New()
	api := New(f, quietLog(), Options{})
	mux := http.NewServeMux()
	api.Mount(mux)
	srv := httptest.NewServer(mux)
	t.Cleanup(func() {
		srv.CloseClientConnections()
		srv.Close()
	})
	return f, &env{t: t, api: api, srv: srv}
}

// Every broker error kind answers with its HTTP status and code, and the
// broker's Retriable bit.
func TestFakeErrorKindsMapToStatuses(t *testing.T) {
	f, e := fakeEnv(t)
	cases := []struct {
		kind   error
		status int
	}{
		{broker.ErrInvalidArgument, 400}, {broker.ErrInvalidTopicName, 400}, {broker.ErrCorruptBatch, 400},
		{broker.ErrOffsetOutOfRange, 400}, {broker.ErrMessageTooLarge, 413}, {broker.ErrTopicNotFound, 404},
		{broker.ErrPartitionNotFound, 404}, {broker.ErrGroupNotFound, 404}, {broker.ErrTopicExists, 409},
		{broker.ErrNotAssigned, 409}, {broker.ErrUnknownMember, 409}, {broker.ErrGroupNotEmpty, 409},
		{broker.ErrPermissionDenied, 403}, {broker.ErrResourceExhausted, 429}, {broker.ErrUnavailable, 503},
		{errors.New("a bug"), 500},
	}
	for _, tc := range cases {
		f.Errs["Topic"] = broker.Errorf(tc.kind, "detail")
		if tc.status == 500 {
			f.Errs["Topic"] = tc.kind
		}
		info, _ := e.wantError("GET", "/v1/topics/t", nil, tc.status, broker.Code(f.Errs["Topic"]))
		if info.Retriable != broker.Retriable(f.Errs["Topic"]) {
			t.Errorf("%v: retriable %v", tc.kind, info.Retriable)
		}
	}
}

// A published JSON body reaches the broker as the records it names.
func TestFakePublishConvertsRecords(t *testing.T) {
	f, e := fakeEnv(t)
	f.CreateTopic(context.Background(), "t", broker.TopicConfig{}, false)
	e.call("POST", "/v1/topics/t/records", `{"records":[{"key":"k","payload":"hello","headers":{"h":"v"}},{"payload":"again"}]}`, http.StatusOK, nil)
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

// An SSE subscription grants one delivery's worth of credit, then gives
// back what each written delivery spent.
func TestFakeSSEGrantsWhatItWrote(t *testing.T) {
	f, e := fakeEnv(t)
	f.CreateTopic(context.Background(), "t", broker.TopicConfig{}, false)
	f.Publish(context.Background(), &broker.PublishRequest{Topic: "t", Partition: 0, Records: recs(3)})
	resp := e.do("GET", "/v1/topics/t/subscribe?from=earliest", nil)
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	records := 0
	for records < 3 && sc.Scan() {
		if strings.HasPrefix(sc.Text(), "event: record") {
			records++
		}
	}
	f.Publish(context.Background(), &broker.PublishRequest{Topic: "t", Partition: 0, Records: recs(1)})
	for records < 4 && sc.Scan() {
		if strings.HasPrefix(sc.Text(), "event: record") {
			records++
		}
	}
	var grants []brokertest.Call
	for _, c := range f.Calls() {
		if c.Method == "Grant" {
			grants = append(grants, c)
		}
	}
	if len(grants) < 2 || grants[0].Records != sseBatchRecords || grants[0].Bytes != sseBatchBytes || grants[1].Records != 3 {
		t.Fatalf("grants %+v; want the batch's worth, then the 3 records written", grants)
	}
}

func recs(n int) []record.Record {
	out := make([]record.Record, n)
	for i := range out {
		out[i].Payload = []byte("x")
	}
	return out
}
