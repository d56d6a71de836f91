package kafka

import (
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/hermes-mq/hermes/internal/reqmetrics"
)

// Request metrics: every request a connection reads is counted and timed
// by API (Produce, Fetch, ...) from when dispatch reads it to when its
// answer is ready to be written (writeAnswers), with the result "answered",
// "no_answer" (produce with acks=0) or "closed" (the connection closes
// after it). Kafka reports errors per topic and partition inside the
// answer; those are not counted here.

const (
	kafkaAnswered = iota
	kafkaNoAnswer
	kafkaClosed
)

func kafkaCode(c int) string {
	switch c {
	case kafkaAnswered:
		return "answered"
	case kafkaNoAnswer:
		return "no_answer"
	}
	return "closed"
}

// apiMetrics are the cached series by API key (nil: none).
type apiMetrics [128]*reqmetrics.Method

func newAPIMetrics(m *reqmetrics.Metrics) *apiMetrics {
	if m == nil {
		return nil
	}
	var am apiMetrics
	other := m.Method(reqmetrics.Kafka, "other", kafkaCode)
	for i := range am {
		am[i] = other
	}
	for key := range handlers {
		if key >= 0 && int(key) < len(am) {
			am[key] = m.Method(reqmetrics.Kafka, kmsg.NameForKey(key), kafkaCode)
		}
	}
	return &am
}

// done counts a's request, answered now.
func (am *apiMetrics) done(a *answer) {
	if am == nil || a.start.IsZero() {
		return
	}
	code := kafkaAnswered
	switch {
	case a.close:
		code = kafkaClosed
	case a.none:
		code = kafkaNoAnswer
	}
	h := am[len(am)-1]
	if a.key >= 0 && int(a.key) < len(am) {
		h = am[a.key]
	}
	h.Done(code, time.Since(a.start))
}
