package rest

import (
	"io"
	"math"
	"net/http"
	"net/url"
	"time"

	"github.com/hermes-mq/hermes/internal/broker"
)

// createTopicBody is the body of POST /v1/topics. Zero values take the
// broker's defaults.
type createTopicBody struct {
	Name            string `json:"name"`
	Partitions      int32  `json:"partitions"`
	RetentionMs     int64  `json:"retention_ms"`
	RetentionBytes  int64  `json:"retention_bytes"`
	MaxMessageBytes int32  `json:"max_message_bytes"`
	DefaultMode     string `json:"default_mode"`
	SegmentBytes    int64  `json:"segment_bytes"`
	// ReplicationFactor: replicas per partition (0: the cluster's default).
	ReplicationFactor int32 `json:"replication_factor"`
	IfNotExists       bool  `json:"if_not_exists"`
}

// maxRetentionMs is the longest retention a time.Duration holds.
const maxRetentionMs = math.MaxInt64 / int64(time.Millisecond)

// decodeCreateTopic decodes and validates a create-topic body (the broker
// checks the name and the bounds of the values).
func decodeCreateTopic(r io.Reader) (createTopicBody, broker.TopicConfig, error) {
	body, err := decodeJSON[createTopicBody](r)
	if err != nil {
		return createTopicBody{}, broker.TopicConfig{}, err
	}
	cfg, err := body.config()
	return *body, cfg, err
}

func (c *createTopicBody) config() (broker.TopicConfig, error) {
	mode, err := broker.ParseMode(c.DefaultMode)
	if err != nil {
		return broker.TopicConfig{}, invalid("field \"default_mode\" must be consistent, eventual or performance, got %q", c.DefaultMode)
	}
	for _, f := range []struct {
		name string
		v    int64
	}{
		{"partitions", int64(c.Partitions)}, {"retention_ms", c.RetentionMs}, {"retention_bytes", c.RetentionBytes},
		{"max_message_bytes", int64(c.MaxMessageBytes)}, {"segment_bytes", c.SegmentBytes},
		{"replication_factor", int64(c.ReplicationFactor)},
	} {
		if f.v < 0 {
			return broker.TopicConfig{}, invalid("%v", fieldErrorf(f.name, "must not be negative, got %d", f.v))
		}
	}
	if c.RetentionMs > maxRetentionMs {
		return broker.TopicConfig{}, invalid("%v", fieldErrorf("retention_ms", "must be at most %d, got %d", maxRetentionMs, c.RetentionMs))
	}
	return broker.TopicConfig{
		Partitions:        c.Partitions,
		RetentionAge:      time.Duration(c.RetentionMs) * time.Millisecond,
		RetentionBytes:    c.RetentionBytes,
		MaxMessageBytes:   c.MaxMessageBytes,
		DefaultMode:       mode,
		SegmentBytes:      c.SegmentBytes,
		ReplicationFactor: c.ReplicationFactor,
	}, nil
}

type topicJSON struct {
	Name       string          `json:"name"`
	Config     topicConfigJSON `json:"config"`
	Partitions []partitionJSON `json:"partitions"`
}

type topicConfigJSON struct {
	Partitions      int32  `json:"partitions"`
	RetentionMs     int64  `json:"retention_ms"`
	RetentionBytes  int64  `json:"retention_bytes"`
	MaxMessageBytes int32  `json:"max_message_bytes"`
	DefaultMode     string `json:"default_mode"`
	SegmentBytes    int64  `json:"segment_bytes"`
	// ReplicationFactor is the replicas per partition.
	ReplicationFactor int32 `json:"replication_factor"`
}

type partitionJSON struct {
	Partition     int32 `json:"partition"`
	StartOffset   int64 `json:"start_offset"`
	EndOffset     int64 `json:"end_offset"` // the high watermark
	SizeBytes     int64 `json:"size_bytes"`
	RingEndOffset int64 `json:"ring_end_offset"`
	RingEvicted   int64 `json:"ring_evicted"`
}

func toTopicJSON(ti broker.TopicInfo) topicJSON {
	out := topicJSON{
		Name: ti.Name,
		Config: topicConfigJSON{
			Partitions:        ti.Config.Partitions,
			RetentionMs:       ti.Config.RetentionAge.Milliseconds(),
			RetentionBytes:    ti.Config.RetentionBytes,
			MaxMessageBytes:   ti.Config.MaxMessageBytes,
			DefaultMode:       ti.Config.DefaultMode.String(),
			SegmentBytes:      ti.Config.SegmentBytes,
			ReplicationFactor: ti.Config.ReplicationFactor,
		},
		Partitions: make([]partitionJSON, len(ti.Partitions)),
	}
	for i, p := range ti.Partitions {
		out.Partitions[i] = partitionJSON{
			Partition: p.Partition, StartOffset: p.StartOffset, EndOffset: p.EndOffset,
			SizeBytes: p.SizeBytes, RingEndOffset: p.RingEnd, RingEvicted: p.RingEvicted,
		}
	}
	return out
}

// createTopic answers 201 with the new topic, or 200 with the existing
// one when if_not_exists found it (decided by a look before the create,
// so a concurrent create of the same name may still answer 201).
func (a *API) createTopic(w http.ResponseWriter, r *http.Request, _ url.Values) error {
	body, cfg, err := decodeCreateTopic(http.MaxBytesReader(w, r.Body, MaxBody))
	if err != nil {
		return err
	}
	status := http.StatusCreated
	if body.IfNotExists {
		if _, err := a.b.Topic(r.Context(), body.Name); err == nil {
			status = http.StatusOK
		}
	}
	ti, err := a.b.CreateTopic(r.Context(), body.Name, cfg, body.IfNotExists)
	if err != nil {
		return err
	}
	w.Header().Set("Location", "/v1/topics/"+url.PathEscape(ti.Name))
	writeJSON(w, status, toTopicJSON(ti))
	return nil
}

func (a *API) listTopics(w http.ResponseWriter, r *http.Request, q url.Values) error {
	out := struct {
		Topics    []topicJSON `json:"topics"`
		NextAfter string      `json:"next_after,omitempty"`
	}{Topics: []topicJSON{}}
	topics, err := a.b.Topics(r.Context())
	if err != nil {
		return err
	}
	topics, out.NextAfter, err = page(q, topics, func(t broker.TopicInfo) string { return t.Name })
	if err != nil {
		return err
	}
	for _, ti := range topics {
		out.Topics = append(out.Topics, toTopicJSON(ti))
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

func (a *API) getTopic(w http.ResponseWriter, r *http.Request, _ url.Values) error {
	ti, err := a.b.Topic(r.Context(), r.PathValue("topic"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, toTopicJSON(ti))
	return nil
}

func (a *API) deleteTopic(w http.ResponseWriter, r *http.Request, _ url.Values) error {
	if err := a.b.DeleteTopic(r.Context(), r.PathValue("topic")); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// alterTopicBody is the body of PATCH /v1/topics/{topic}: the fields
// given change, the others stay.
type alterTopicBody struct {
	Partitions      *int32  `json:"partitions"`
	RetentionMs     *int64  `json:"retention_ms"`
	RetentionBytes  *int64  `json:"retention_bytes"`
	MaxMessageBytes *int32  `json:"max_message_bytes"`
	DefaultMode     *string `json:"default_mode"`
}

func (c *alterTopicBody) change() (broker.TopicChange, error) {
	ch := broker.TopicChange{Partitions: c.Partitions, RetentionBytes: c.RetentionBytes, MaxMessageBytes: c.MaxMessageBytes}
	if c.RetentionMs != nil {
		if *c.RetentionMs < 0 || *c.RetentionMs > maxRetentionMs {
			return ch, invalid("%v", fieldErrorf("retention_ms", "must be 0 to %d, got %d", maxRetentionMs, *c.RetentionMs))
		}
		d := time.Duration(*c.RetentionMs) * time.Millisecond
		ch.RetentionAge = &d
	}
	if c.DefaultMode != nil {
		m, err := broker.ParseMode(*c.DefaultMode)
		if err != nil || m == broker.ModeDefault {
			return ch, invalid("field \"default_mode\" must be consistent, eventual or performance, got %q", *c.DefaultMode)
		}
		ch.DefaultMode = &m
	}
	if ch == (broker.TopicChange{}) {
		return ch, invalid("nothing to change: give partitions, retention_ms, retention_bytes, max_message_bytes or default_mode")
	}
	return ch, nil
}

func (a *API) alterTopic(w http.ResponseWriter, r *http.Request, _ url.Values) error {
	body, err := decodeJSON[alterTopicBody](http.MaxBytesReader(w, r.Body, MaxBody))
	if err != nil {
		return err
	}
	ch, err := body.change()
	if err != nil {
		return err
	}
	ti, err := a.b.AlterTopic(r.Context(), r.PathValue("topic"), ch)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, toTopicJSON(ti))
	return nil
}
