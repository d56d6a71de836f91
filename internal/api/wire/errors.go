package wire

import (
	"context"
	"errors"

	"github.com/hermes-mq/hermes/internal/broker"
	"github.com/hermes-mq/hermes/pkg/wire"
)

// toWire maps a broker error onto an ERROR body: the code by its name (as
// every API names it), whether it is retriable and how soon.
func toWire(err error, fatal bool) *wire.Error {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return &wire.Error{Code: wire.CodeUnavailable, Retriable: true, Message: err.Error(), Fatal: fatal}
	}
	code := wire.CodeOf(broker.Code(err))
	if code == 0 {
		code = wire.CodeOf("INTERNAL")
	}
	return &wire.Error{
		Code: code, Retriable: broker.Retriable(err), RetryAfter: broker.RetryAfter(err),
		Message: err.Error(), Fatal: fatal,
	}
}
