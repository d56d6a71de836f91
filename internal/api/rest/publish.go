package rest

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"sync"

	"github.com/hermes-mq/hermes/internal/broker"
	"github.com/hermes-mq/hermes/internal/httpbody"
	"github.com/hermes-mq/hermes/pkg/record"
)

// publishBody is a publish request: one record (the record fields at the
// top level), or a batch in "records". In a batch, the top-level
// "partition" is the default of records that name none.
type publishBody struct {
	Payload           *string     `json:"payload"`
	PayloadBase64     *string     `json:"payload_base64"`
	Key               *string     `json:"key"`
	KeyBase64         *string     `json:"key_base64"`
	Headers           *headersIn  `json:"headers"`
	MessageID         *string     `json:"message_id"`
	Partition         *int32      `json:"partition"`
	TimestampUnixNano *int64      `json:"timestamp_unix_nano"`
	Mode              *string     `json:"mode"`
	Records           *recordList `json:"records"`
}

// publishPlan is a decoded publish: records and, for each, its partition
// (broker.AnyPartition: chosen by key).
type publishPlan struct {
	mode       broker.Mode
	records    []record.Record
	partitions []int32
}

// readPublish reads a publish body of known length (within
// MaxRecordsBody) into memory and decodes it with decodePublishBytes. If
// the body cannot be read whole, decodePublish gets what was read and
// then the error, as it would have had streaming from r, so that the
// answer is the same.
func readPublish(r io.Reader, length int64) (*publishPlan, error) {
	body, err := httpbody.Read(r, length)
	if err != nil {
		return decodePublish(io.MultiReader(bytes.NewReader(body), errReader{err}))
	}
	return decodePublishBytes(body)
}

// decodePublishBytes decodes and validates a publish body held in
// memory: by decodePublishFast if it has the common shape, else by
// decodePublish, with the same result and the same errors.
func decodePublishBytes(body []byte) (*publishPlan, error) {
	var b publishBody
	if !decodePublishFast(body, &b) {
		return decodePublish(bytes.NewReader(body))
	}
	return b.plan()
}

// decodePublish decodes and validates a publish body.
func decodePublish(r io.Reader) (*publishPlan, error) {
	body, err := decodeJSON[publishBody](r)
	if err != nil {
		return nil, err
	}
	return body.plan()
}

func (b *publishBody) plan() (*publishPlan, error) {
	p := &publishPlan{}
	var err error
	if b.Mode != nil {
		if p.mode, err = broker.ParseMode(*b.Mode); err != nil {
			return nil, invalid("field \"mode\" must be consistent, eventual or performance, got %q", *b.Mode)
		}
	}
	def, err := partitionField(b.Partition, "partition")
	if err != nil {
		return nil, err
	}
	single := recordIn{
		Payload: b.Payload, PayloadBase64: b.PayloadBase64, Key: b.Key, KeyBase64: b.KeyBase64,
		Headers: b.Headers, MessageID: b.MessageID, TimestampUnixNano: b.TimestampUnixNano,
	}
	if b.Records == nil {
		rec, err := single.record("")
		if err != nil {
			return nil, err
		}
		p.records, p.partitions = []record.Record{rec}, []int32{def}
		return p, nil
	}
	if field := single.firstSet(); field != "" {
		return nil, invalid("a body holds one record or \"records\", not both; field %q belongs in a record of \"records\"", field)
	}
	if len(*b.Records) == 0 {
		return nil, invalid("field \"records\" must hold at least one record")
	}
	p.records = make([]record.Record, len(*b.Records))
	p.partitions = make([]int32, len(*b.Records))
	for i := range *b.Records {
		ri := &(*b.Records)[i]
		prefix := "records[" + strconv.Itoa(i) + "]" // not fmt: this runs for every record
		if p.records[i], err = ri.record(prefix); err != nil {
			return nil, err
		}
		p.partitions[i] = def
		if ri.Partition != nil {
			if p.partitions[i], err = partitionField(ri.Partition, prefix+".partition"); err != nil {
				return nil, err
			}
		}
	}
	return p, nil
}

func partitionField(p *int32, path string) (int32, error) {
	if p == nil {
		return broker.AnyPartition, nil
	}
	if *p < 0 {
		return 0, invalid("%v", fieldErrorf(path, "must not be negative, got %d", *p))
	}
	return *p, nil
}

// firstSet names the first record field set (other than partition), or "".
func (r *recordIn) firstSet() string {
	switch {
	case r.Payload != nil:
		return "payload"
	case r.PayloadBase64 != nil:
		return "payload_base64"
	case r.Key != nil:
		return "key"
	case r.KeyBase64 != nil:
		return "key_base64"
	case r.Headers != nil:
		return "headers"
	case r.MessageID != nil:
		return "message_id"
	case r.TimestampUnixNano != nil:
		return "timestamp_unix_nano"
	}
	return ""
}

// record converts and validates one record; prefix is its path in the body.
func (r *recordIn) record(prefix string) (record.Record, error) {
	var out record.Record
	var err error
	if out.Payload, err = bytesField(r.Payload, r.PayloadBase64, prefix, "payload"); err != nil {
		return out, err
	}
	if out.Key, err = bytesField(r.Key, r.KeyBase64, prefix, "key"); err != nil {
		return out, err
	}
	if r.MessageID != nil {
		if out.MessageID, err = parseID(*r.MessageID); err != nil {
			return out, invalid("%v", fieldErrorf(joinPath(prefix, "message_id"), "%v", err))
		}
	}
	if r.TimestampUnixNano != nil {
		if *r.TimestampUnixNano < 0 {
			return out, invalid("%v", fieldErrorf(joinPath(prefix, "timestamp_unix_nano"), "must not be negative"))
		}
		out.Timestamp = *r.TimestampUnixNano
	}
	if r.Headers != nil && len(*r.Headers) > 0 {
		out.Headers = make([]record.Header, len(*r.Headers))
		for j := range *r.Headers {
			if out.Headers[j], err = (*r.Headers)[j].header(fmt.Sprintf("%s[%d]", joinPath(prefix, "headers"), j)); err != nil {
				return out, err
			}
		}
	}
	return out, nil
}

func (h *headerIn) header(path string) (record.Header, error) {
	if h.Key == nil && h.KeyBase64 == nil {
		return record.Header{}, invalid("%v", fieldErrorf(path, "needs \"key\" or \"key_base64\""))
	}
	key, err := bytesField(h.Key, h.KeyBase64, path, "key")
	if err != nil {
		return record.Header{}, err
	}
	value, err := bytesField(h.Value, h.ValueBase64, path, "value")
	if err != nil {
		return record.Header{}, err
	}
	return record.Header{Key: string(key), Value: value}, nil
}

// bytesField reads a field given as text (name) or base64 (name_base64):
// at most one of them; nil when neither is set.
func bytesField(text, b64 *string, prefix, name string) ([]byte, error) {
	switch {
	case text != nil && b64 != nil:
		return nil, invalid("fields %q and %q exclude each other", joinPath(prefix, name), joinPath(prefix, name+"_base64"))
	case text != nil:
		out := make([]byte, len(*text))
		copy(out, *text)
		return out, nil
	case b64 != nil:
		out, err := base64.StdEncoding.DecodeString(*b64)
		if err != nil {
			return nil, invalid("%v", fieldErrorf(joinPath(prefix, name+"_base64"), "is not standard base64 (RFC 4648 §4, padded): %v", err))
		}
		if out == nil {
			out = []byte{}
		}
		return out, nil
	}
	return nil, nil
}

// publishResponse answers a publish: where each record went, in request order.
type publishResponse struct {
	Mode    string      `json:"mode"`
	Records []recordAck `json:"records"`
}

type recordAck struct {
	Partition int32  `json:"partition"`
	Offset    int64  `json:"offset"`
	MessageID string `json:"message_id"`
}

func (a *API) publish(w http.ResponseWriter, r *http.Request, _ url.Values) error {
	size := r.ContentLength
	if size < 0 || size > MaxRecordsBody {
		size = MaxRecordsBody // unknown length: the most it may be
	}
	if !a.publishBytes.acquire(size) {
		return &kindError{
			kind: broker.ErrResourceExhausted, retryAfter: publishBytesRetry,
			msg: fmt.Sprintf("publish requests of %d bytes are being handled (limit %d)", a.publishBytes.inUse(), a.publishBytes.limit),
		}
	}
	defer a.publishBytes.release(size)
	body := http.MaxBytesReader(w, r.Body, MaxRecordsBody)
	var plan *publishPlan
	var err error
	if r.ContentLength >= 0 && r.ContentLength <= MaxRecordsBody {
		plan, err = readPublish(body, r.ContentLength)
	} else {
		plan, err = decodePublish(body) // it may end, too large, before the end
	}
	if err != nil {
		return err
	}
	resp, err := a.publishPlan(r.Context(), r.PathValue("topic"), plan)
	if err != nil {
		return err
	}
	writePublishResponse(w, resp)
	return nil
}

// publishPlan publishes the records, one broker request per partition
// named (and one for the records whose partition the broker chooses), all
// at once, and waits for every answer, even after one failed: an error is
// answered only once no request of the body is still being stored. It
// fails with the error of the first failed request in order; as with any
// failed publish, records of the other requests may have been stored (a
// retry with the same message ids is recognised).
func (a *API) publishPlan(ctx context.Context, topic string, plan *publishPlan) (*publishResponse, error) {
	reqs, idx := splitByPartition(topic, plan)
	type answer struct {
		res *broker.PublishResult
		err error
	}
	answers := make([]chan answer, len(reqs))
	for i, req := range reqs {
		ch := make(chan answer, 1)
		answers[i] = ch
		a.b.PublishAsync(ctx, req, func(res *broker.PublishResult, err error) { ch <- answer{res, err} })
	}
	resp := &publishResponse{Records: make([]recordAck, len(plan.records))}
	var failed error
	for i, ch := range answers {
		var ans answer
		select {
		case ans = <-ch:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		if failed == nil {
			failed = ans.err
		}
		if failed != nil {
			continue
		}
		resp.Mode = ans.res.Mode.String()
		for j, ack := range ans.res.Acks {
			resp.Records[idx[i][j]] = recordAck{
				Partition: ack.Partition, Offset: ack.Offset,
				MessageID: formatID(reqs[i].Records[j].MessageID),
			}
		}
	}
	if failed != nil {
		return nil, failed
	}
	return resp, nil
}

// splitByPartition makes one broker request per target partition; idx[i]
// lists the plan's indexes of request i's records.
func splitByPartition(topic string, plan *publishPlan) ([]*broker.PublishRequest, [][]int) {
	if samePartition(plan.partitions) {
		req := &broker.PublishRequest{Topic: topic, Partition: plan.partitions[0], Mode: plan.mode, Records: plan.records}
		return []*broker.PublishRequest{req}, [][]int{identity(len(plan.records))}
	}
	var reqs []*broker.PublishRequest
	var idx [][]int
	at := make(map[int32]int)
	for i, p := range plan.partitions {
		k, ok := at[p]
		if !ok {
			k = len(reqs)
			at[p] = k
			reqs = append(reqs, &broker.PublishRequest{Topic: topic, Partition: p, Mode: plan.mode})
			idx = append(idx, nil)
		}
		reqs[k].Records = append(reqs[k].Records, plan.records[i])
		idx[k] = append(idx[k], i)
	}
	return reqs, idx
}

// samePartition reports whether ps (not empty) name one partition.
func samePartition(ps []int32) bool {
	for _, p := range ps[1:] {
		if p != ps[0] {
			return false
		}
	}
	return true
}

// identity returns 0, 1, ... n-1; without allocating for n = 1.
func identity(n int) []int {
	if n == 1 {
		return zeroIndex
	}
	idx := make([]int, n)
	for i := range idx {
		idx[i] = i
	}
	return idx
}

// zeroIndex is identity(1), shared: it is only read.
var zeroIndex = []int{0}

// byteBudget bounds the bytes of publish bodies the adapter decodes and
// holds at once. A request takes its share before it is read, and one
// request is always let through when nothing else holds any.
type byteBudget struct {
	mu    sync.Mutex
	used  int64 // guarded by mu
	limit int64
}

func (b *byteBudget) acquire(n int64) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.used > 0 && b.used+n > b.limit {
		return false
	}
	b.used += n
	return true
}

func (b *byteBudget) release(n int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.used -= n
}

func (b *byteBudget) inUse() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.used
}
