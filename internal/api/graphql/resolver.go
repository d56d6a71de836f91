package graphql

import (
	"log/slog"

	"github.com/hermes-mq/hermes/internal/broker"
)

// Resolver is the root of the schema's resolvers: the broker they call,
// and the live group subscriptions of this endpoint for the ack mutation.
type Resolver struct {
	b       broker.API
	log     *slog.Logger
	members *members
}
