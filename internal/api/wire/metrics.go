package wire

import (
	"time"

	"github.com/hermes-mq/hermes/internal/reqmetrics"
	"github.com/hermes-mq/hermes/pkg/wire"
)

// Request metrics: every request frame after the handshake is counted and
// timed in dispatch, by frame type, with "ok" or "error" (the frame was
// refused, or the connection closes). dispatch hands a publish to the
// broker and returns: its time is the handling of the frame, not the wait
// for the acknowledgement (hermes_publish_latency_seconds times that).

var frameNames = map[byte]string{
	wire.FramePing: "PING", wire.FrameOpenTopic: "OPEN_TOPIC", wire.FramePublish: "PUBLISH",
	wire.FrameSubscribe: "SUBSCRIBE", wire.FrameCredit: "CREDIT", wire.FrameAck: "ACK", wire.FrameNack: "NACK",
	wire.FrameCommit: "COMMIT", wire.FrameUnsubscribe: "UNSUBSCRIBE", wire.FrameHello: "HELLO",
}

func wireCode(c int) string {
	if c == 0 {
		return "ok"
	}
	return "error"
}

// frameMetrics are the cached series by frame type (nil: none).
type frameMetrics [256]*reqmetrics.Method

func newFrameMetrics(m *reqmetrics.Metrics) *frameMetrics {
	if m == nil {
		return nil
	}
	var fm frameMetrics
	other := m.Method(reqmetrics.Wire, "other", wireCode)
	for i := range fm {
		fm[i] = other
	}
	for t, name := range frameNames {
		fm[t] = m.Method(reqmetrics.Wire, name, wireCode)
	}
	return &fm
}

// done counts one request frame of type t that took since start.
func (fm *frameMetrics) done(t byte, start time.Time, err error) {
	if fm == nil {
		return
	}
	code := 0
	if err != nil {
		code = 1
	}
	fm[t].Done(code, time.Since(start))
}
