package rest

import (
	"net/http"
	"net/url"
	"time"

	"github.com/hermes-mq/hermes/internal/broker"
)

// Pull bounds. maxFetchBytes (as the gRPC API's) bounds one answer to
// max_bytes plus at most one batch (16 MiB) past it, before JSON.
const (
	DefaultFetchRecords = 1000
	MaxFetchRecords     = 10000
	maxFetchBytes       = 15 << 20
)

// fetchParams are the query parameters of a pull.
var fetchParams = []string{"offset", "max", "max_bytes", "wait"}

type fetchResponse struct {
	Records []recordOut `json:"records"`
	// NextOffset is the offset to ask for next (the requested one when
	// no record was returned).
	NextOffset    int64 `json:"next_offset"`
	HighWatermark int64 `json:"high_watermark"`
	StartOffset   int64 `json:"start_offset"`
}

// fetch serves GET /v1/topics/{topic}/partitions/{p}/records: committed
// records from ?offset= (default 0), at most ?max= records and about
// ?max_bytes= bytes, waiting up to ?wait= ms when there are none yet.
func (a *API) fetch(w http.ResponseWriter, r *http.Request, q url.Values) error {
	partition, err := partitionValue(r.PathValue("p"))
	if err != nil {
		return err
	}
	offset, err := intParam(q, "offset", 0, 0, 1<<63-1)
	if err != nil {
		return err
	}
	max, err := intParam(q, "max", DefaultFetchRecords, 1, MaxFetchRecords)
	if err != nil {
		return err
	}
	maxBytes, err := intParam(q, "max_bytes", broker.DefaultFetchBytes, 1, maxFetchBytes)
	if err != nil {
		return err
	}
	wait, err := intParam(q, "wait", 0, 0, broker.MaxFetchWait.Milliseconds())
	if err != nil {
		return err
	}
	res, err := a.b.Fetch(r.Context(), broker.FetchRequest{
		Topic: r.PathValue("topic"), Partition: partition, Offset: offset,
		MaxBytes: int(maxBytes), MaxWait: time.Duration(wait) * time.Millisecond,
	})
	if err != nil {
		return err
	}
	recs, next, err := broker.DecodeFrom(nil, res.Batches, offset, int(max))
	if err != nil {
		return errorf(broker.ErrUnavailable, "decode %s/%d at %d: %v", r.PathValue("topic"), partition, offset, err)
	}
	out := fetchResponse{
		Records: make([]recordOut, len(recs)), NextOffset: next,
		HighWatermark: res.HighWatermark, StartOffset: res.StartOffset,
	}
	for i := range recs {
		out.Records[i] = toRecordOut(&recs[i], partition)
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}
