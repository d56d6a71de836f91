package client

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/credentials/insecure"

	hermesv1 "github.com/hermes-mq/hermes/proto/hermes/v1"
)

// DefaultAddr is the address of a broker started with default settings.
const DefaultAddr = "127.0.0.1:50051"

// Defaults of the client options.
const (
	DefaultDialTimeout    = 10 * time.Second
	DefaultRetryAttempts  = 10
	DefaultRetryBackoff   = 100 * time.Millisecond
	DefaultMaxRecvMsgSize = 64 << 20
)

// Client is a connection to a Hermes broker. It is safe for concurrent use;
// one Client per broker (or cluster address) is enough for a process, and
// its Producers and Consumers share its connection.
type Client struct {
	conn  *grpc.ClientConn
	api   hermesv1.HermesClient
	cfg   clientConfig
	log   *slog.Logger
	retry RetryPolicy

	mu     sync.Mutex
	closed bool // Lock: mu.
}

type clientConfig struct {
	dialTimeout time.Duration
	logger      *slog.Logger
	retry       RetryPolicy
	dialOpts    []grpc.DialOption
	recvMax     int
}

// Option configures Dial.
type Option func(*clientConfig)

// WithDialTimeout bounds how long Dial waits for the connection to become
// ready (default DefaultDialTimeout). 0 means only ctx bounds it.
func WithDialTimeout(d time.Duration) Option {
	return func(c *clientConfig) { c.dialTimeout = d }
}

// WithLogger sets the logger for reconnects and retries (default: discard).
func WithLogger(l *slog.Logger) Option {
	return func(c *clientConfig) { c.logger = l }
}

// WithRetry sets how often a retriable failure (UNAVAILABLE,
// RESOURCE_EXHAUSTED, a broken stream) is tried in total and the first
// backoff; later backoffs double up to 20 times the first. maxAttempts < 1
// counts as 1 (no retry). Defaults: DefaultRetryAttempts,
// DefaultRetryBackoff. The policy applies to admin calls, Publish, a
// Producer's batches and a Consumer's reconnects.
func WithRetry(maxAttempts int, backoff time.Duration) Option {
	return func(c *clientConfig) {
		c.retry = RetryPolicy{MaxAttempts: maxAttempts, Backoff: backoff, MaxBackoff: 20 * backoff}
	}
}

// WithDialOptions adds gRPC dial options, e.g. transport credentials (the
// default is an insecure connection). Stats handlers must not keep a
// reference to sent messages after SendMsg returns: the Producer reuses
// its encode buffers.
func WithDialOptions(opts ...grpc.DialOption) Option {
	return func(c *clientConfig) { c.dialOpts = append(c.dialOpts, opts...) }
}

// WithMaxReceiveBytes bounds the size of one message received from the
// broker (default DefaultMaxRecvMsgSize). It must exceed the credit bytes
// of a subscription.
func WithMaxReceiveBytes(n int) Option {
	return func(c *clientConfig) { c.recvMax = n }
}

// Dial connects to the broker at addr ("host:port") and waits until the
// connection is ready, bounded by ctx and the dial timeout. Once
// connected, the Client reconnects on its own when the connection breaks.
// On a cluster, addr may list several nodes ("h1:p1,h2:p2,h3:p3"): the
// Client uses one and moves to the next when it fails; any node serves
// any request.
//
// Errors: ErrUnavailable when the first connection attempt fails (e.g.
// connection refused) or does not complete within the dial timeout,
// ctx.Err() when ctx ends first. The returned Client must be closed.
func Dial(ctx context.Context, addr string, opts ...Option) (*Client, error) {
	cfg := clientConfig{
		dialTimeout: DefaultDialTimeout,
		retry:       defaultRetry(),
		recvMax:     DefaultMaxRecvMsgSize,
	}
	for _, o := range opts {
		o(&cfg)
	}
	if cfg.logger == nil {
		cfg.logger = slog.New(slog.DiscardHandler)
	}
	cfg.retry = cfg.retry.normalize()
	target, nodes, err := nodesTarget(addr)
	if err != nil {
		return nil, &Error{Code: CodeInvalidArgument, Message: err.Error()}
	}
	dopts := append([]grpc.DialOption{
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(cfg.recvMax)),
	}, cfg.dialOpts...)
	if nodes != nil {
		dopts = append(dopts, grpc.WithResolvers(nodes))
	}
	conn, err := grpc.NewClient(target, dopts...)
	if err != nil {
		return nil, &Error{Code: CodeInvalidArgument, Message: fmt.Sprintf("dial %s: %v", addr, err)}
	}
	if err := waitReady(ctx, conn, cfg.dialTimeout); err != nil {
		conn.Close()
		return nil, fmt.Errorf("dial %s: %w", addr, err)
	}
	return &Client{
		conn:  conn,
		api:   hermesv1.NewHermesClient(conn),
		cfg:   cfg,
		log:   cfg.logger,
		retry: cfg.retry,
	}, nil
}

// waitReady waits until conn is READY, bounded by ctx and timeout (0: none).
func waitReady(ctx context.Context, conn *grpc.ClientConn, timeout time.Duration) error {
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	conn.Connect()
	for {
		s := conn.GetState()
		if s == connectivity.Ready {
			return nil
		}
		if s == connectivity.Shutdown {
			return ErrClosed
		}
		if s == connectivity.TransientFailure { // e.g. connection refused: fail fast
			return &Error{Code: CodeUnavailable, Retriable: true, Message: "broker not reachable"}
		}
		if !conn.WaitForStateChange(ctx, s) {
			if ctx.Err() == context.Canceled {
				return ctx.Err()
			}
			return &Error{Code: CodeUnavailable, Retriable: true,
				Message: "broker not reachable (last state " + s.String() + ")"}
		}
	}
}

// Close closes the connection. Producers and Consumers made from the
// Client must be closed first; calls in progress fail. Close is idempotent.
func (c *Client) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil
	}
	c.closed = true
	return c.conn.Close()
}

// isClosed reports whether Close was called.
func (c *Client) isClosed() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.closed
}

// Health asks the broker for its status ("SERVING" when healthy), node id
// and version.
func (c *Client) Health(ctx context.Context) (status, nodeID, version string, err error) {
	var resp *hermesv1.HealthResponse
	err = c.call(ctx, func(ctx context.Context) (e error) {
		resp, e = c.api.Health(ctx, &hermesv1.HealthRequest{})
		return e
	})
	if err != nil {
		return "", "", "", err
	}
	return resp.GetStatus(), resp.GetNodeId(), resp.GetVersion(), nil
}

// call runs one unary RPC with the client's retry policy: retriable
// failures are tried again up to MaxAttempts in total, waiting the
// broker's RetryAfter hint or the backoff, whichever is longer.
func (c *Client) call(ctx context.Context, rpc func(context.Context) error) error {
	if c.isClosed() {
		return ErrClosed
	}
	for attempt := 1; ; attempt++ {
		err := fromRPC(ctx, rpc(ctx))
		if err == nil || !isRetriable(err) || attempt >= c.retry.MaxAttempts {
			return err
		}
		c.log.Debug("hermes: retrying call", "attempt", attempt, "err", err)
		if werr := sleepCtx(ctx, c.retry.delay(attempt, retryAfter(err))); werr != nil {
			return err
		}
	}
}
