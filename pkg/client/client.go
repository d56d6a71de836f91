package client

import (
	"context"
	"crypto/tls"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/experimental"
	"google.golang.org/grpc/resolver"

	"github.com/hermes-mq/hermes/pkg/bufpool"

	hermesv1 "github.com/hermes-mq/hermes/proto/hermes/v1"
)

// DefaultAddr is the address of a broker started with default settings.
const DefaultAddr = "127.0.0.1:50051"

// Defaults of the client options.
const (
	DefaultDialTimeout    = 10 * time.Second
	DefaultRetryAttempts  = 15
	DefaultRetryBackoff   = 100 * time.Millisecond
	DefaultMaxRecvMsgSize = 64 << 20

	// leaderConnectTimeout bounds the wait for a connection to a partition
	// leader named by the broker; past it the Client keeps relaying
	// through the dialled nodes.
	leaderConnectTimeout = 2 * time.Second
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

	mu      sync.Mutex
	closed  bool                        // Lock: mu.
	leaders map[string]*grpc.ClientConn // Lock: mu. Connections to partition leaders, by address.
	// unreachable holds leader addresses that could not be connected to,
	// with when to try again. Lock: mu.
	unreachable map[string]time.Time
	// unaryLeader is the leader last named for a partition in an answer
	// to Client.Publish. Lock: mu.
	unaryLeader map[topicPartition]string
	// coordinators is where each group's coordinator was last named (in a
	// relayed subscription's answer). Lock: mu.
	coordinators map[string]string
	// wire, when set, carries publishes and subscriptions (Dial with
	// wire://); conn and api then serve the rest.
	wire *wireConn
}

type topicPartition struct {
	topic     string
	partition int32
}

type clientConfig struct {
	dialTimeout time.Duration
	logger      *slog.Logger
	retry       RetryPolicy
	dialOpts    []grpc.DialOption
	tls         *tls.Config // nil: plaintext
	auth        authHeader  // "": anonymous
	recvMax     int
	direct      bool // send to partition leaders directly
	// user, password and token are auth's credentials, for hermes-wire's
	// handshake.
	user, password, token string
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
// backoff; later backoffs double up to 10 times the first (as Kafka's
// client: retrying often enough to see a new leader soon after an
// election). With the defaults retries span about 12 s. maxAttempts < 1
// counts as 1 (no retry). Defaults: DefaultRetryAttempts,
// DefaultRetryBackoff. The policy applies to admin calls, Publish, a
// Producer's batches and a Consumer's reconnects.
func WithRetry(maxAttempts int, backoff time.Duration) Option {
	return func(c *clientConfig) {
		c.retry = RetryPolicy{MaxAttempts: maxAttempts, Backoff: backoff, MaxBackoff: 10 * backoff}
	}
}

// WithTLS makes the Client connect with TLS, configured by cfg: its
// RootCAs verify the nodes' certificates (nil: the system's roots), its
// Certificates or GetClientCertificate authenticate the client when the
// nodes ask for a certificate. The default is plaintext.
func WithTLS(cfg *tls.Config) Option {
	return func(c *clientConfig) { c.tls = cfg }
}

// WithCredentials authenticates every call as user with password (sent
// with each call as HTTP basic credentials: use TLS beyond loopback).
func WithCredentials(user, password string) Option {
	h := "Basic " + base64.StdEncoding.EncodeToString([]byte(user+":"+password))
	return func(c *clientConfig) { c.auth, c.user, c.password, c.token = authHeader(h), user, password, "" }
}

// WithToken authenticates every call with an API token (hermes token
// create).
func WithToken(token string) Option {
	return func(c *clientConfig) {
		c.auth, c.user, c.password, c.token = authHeader("Bearer "+token), "", "", token
	}
}

// authHeader is per-call credentials: the authorization metadata.
type authHeader string

func (a authHeader) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return map[string]string{"authorization": string(a)}, nil
}

// RequireTransportSecurity is false: a node on loopback may take
// credentials without TLS.
func (a authHeader) RequireTransportSecurity() bool { return false }

// WithDialOptions adds gRPC dial options (applied after the Client's
// own: they win). Stats handlers must not keep a
// reference to sent messages after SendMsg returns: the Producer reuses
// its encode buffers.
func WithDialOptions(opts ...grpc.DialOption) Option {
	return func(c *clientConfig) { c.dialOpts = append(c.dialOpts, opts...) }
}

// WithLeaderRouting sets whether publishes go straight to the leaders of
// their partitions (default true). A cluster node relays a publish for a
// partition it does not lead and names the leader in its answer; with
// leader routing the Client then connects to that leader (at the address
// the node advertises, --advertise-grpc-addr; over hermes-wire
// --advertise-wire-addr) and sends the partition's
// next publishes there, saving a network hop and the relaying node's
// work. A leader that cannot be reached within 2 s is not tried again for
// 30 s: its partitions keep going through the dialled nodes. Turn it off
// when the nodes' advertised addresses are not reachable from the client
// (e.g. behind a single load balancer address). Group members do the same
// with the group's coordinator, from their next subscription of the group
// on (a member is not moved while it runs: that would rebalance the group).
func WithLeaderRouting(on bool) Option {
	return func(c *clientConfig) { c.direct = on }
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
// With the scheme wire:// ("wire://host:port", or several as above) the
// Client publishes and subscribes over hermes-wire, the low-latency
// binary protocol (docs/PROTOCOL.md), with the same Producer, Consumer
// and Publish; what hermes-wire does not carry (topic and group
// administration, Fetch, Health) goes over gRPC to the address the node
// tells in the handshake. Over hermes-wire a Producer's publishes move to
// their partitions' leaders as over gRPC (WithLeaderRouting): a node that
// relayed them names the leader's hermes-wire address (--advertise-wire-addr)
// in its acknowledgement. A subscription cannot name a dead-letter topic
// other than <topic>.dlq (WithDeadLetterTopic) nor bound its
// unacknowledged records (WithMaxAckPending): Subscribe refuses them
// with ErrInvalidArgument.
//
// Errors: ErrUnavailable when the first connection attempt fails (e.g.
// connection refused) or does not complete within the dial timeout,
// ctx.Err() when ctx ends first. The returned Client must be closed.
func Dial(ctx context.Context, addr string, opts ...Option) (*Client, error) {
	cfg := clientConfig{
		dialTimeout: DefaultDialTimeout,
		retry:       defaultRetry(),
		recvMax:     DefaultMaxRecvMsgSize,
		direct:      true,
	}
	for _, o := range opts {
		o(&cfg)
	}
	if cfg.logger == nil {
		cfg.logger = slog.New(slog.DiscardHandler)
	}
	cfg.retry = cfg.retry.normalize()
	if rest, ok := strings.CutPrefix(addr, wireScheme); ok {
		return dialWire(ctx, rest, cfg)
	}
	target, nodes, err := nodesTarget(addr)
	if err != nil {
		return nil, &Error{Code: CodeInvalidArgument, Message: err.Error()}
	}
	conn, err := grpcConn(target, nodes, &cfg)
	if err != nil {
		return nil, &Error{Code: CodeInvalidArgument, Message: fmt.Sprintf("dial %s: %v", addr, err)}
	}
	if err := waitReady(ctx, conn, cfg.dialTimeout); err != nil {
		conn.Close()
		return nil, fmt.Errorf("dial %s: %w", addr, err)
	}
	return newClient(conn, hermesv1.NewHermesClient(conn), cfg), nil
}

// newClient is a Client on conn (nil over hermes-wire without a gRPC
// address) and api.
func newClient(conn *grpc.ClientConn, api hermesv1.HermesClient, cfg clientConfig) *Client {
	return &Client{
		conn:  conn,
		api:   api,
		cfg:   cfg,
		log:   cfg.logger,
		retry: cfg.retry,

		unaryLeader:  make(map[topicPartition]string),
		coordinators: make(map[string]string),
	}
}

// grpcConn makes the gRPC connection to target (nodes: its resolver for
// a list of nodes, or nil), without waiting for it; cfg.dialOpts become
// the options of every connection, those to leaders too.
func grpcConn(target string, nodes resolver.Builder, cfg *clientConfig) (*grpc.ClientConn, error) {
	creds := insecure.NewCredentials()
	if cfg.tls != nil {
		creds = credentials.NewTLS(cfg.tls)
	}
	dopts := []grpc.DialOption{
		grpc.WithTransportCredentials(creds),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(cfg.recvMax), grpc.ForceCodecV2(bufpool.Codec(buffers))),
		experimental.WithBufferPool(buffers),
	}
	if cfg.auth != "" {
		dopts = append(dopts, grpc.WithPerRPCCredentials(cfg.auth))
	}
	dopts = append(dopts, cfg.dialOpts...)
	cfg.dialOpts = dopts // for the connections to leaders
	if nodes != nil {
		dopts = append(dopts[:len(dopts):len(dopts)], grpc.WithResolvers(nodes))
	}
	return grpc.NewClient(target, dopts...)
}

// buffers are the gRPC buffers of every Client in the process. gRPC's
// default pool zeroes each buffer it hands out, which cost a producer
// about 8% of its CPU at hundreds of MB/s; gRPC overwrites every byte it
// uses, and decoded messages do not alias the buffers.
var buffers = bufpool.New()

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
	for _, lc := range c.leaders {
		lc.Close()
	}
	c.leaders = nil
	if c.wire != nil {
		c.wire.close()
	}
	if c.conn == nil {
		return nil
	}
	return c.conn.Close()
}

// coordinatorOf returns where group's coordinator was last named; "" when
// unknown, for no group, or without leader routing.
func (c *Client) coordinatorOf(group string) string {
	if group == "" || !c.cfg.direct {
		return ""
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.coordinators[group]
}

func (c *Client) setCoordinator(group, addr string) {
	if group == "" || !c.cfg.direct {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	remember(c.coordinators, group, addr)
}

// remember sets m[k] to addr, or forgets k when addr is "".
func remember[K comparable](m map[K]string, k K, addr string) {
	if addr == "" {
		delete(m, k)
		return
	}
	m[k] = addr
}

// leaderAPI returns the API of the node at addr, a partition leader named
// by the broker, once its connection is ready (bounded by ctx and
// leaderConnectTimeout). The connection is made on first use and kept
// until Close; "" is the Client's own connection. An address that could
// not be connected to fails at once for avoidAfterFailedConnect.
func (c *Client) leaderAPI(ctx context.Context, addr string) (hermesv1.HermesClient, error) {
	if addr == "" {
		return c.api, nil
	}
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil, ErrClosed
	}
	if until, ok := c.unreachable[addr]; ok {
		if time.Now().Before(until) {
			c.mu.Unlock()
			return nil, &Error{Code: CodeUnavailable, Retriable: true, Message: "leader " + addr + " was not reachable recently"}
		}
		delete(c.unreachable, addr)
	}
	conn := c.leaders[addr]
	if conn != nil && conn.GetState() == connectivity.TransientFailure {
		conn.Close() // a fresh connection, not one waiting out a long backoff
		conn = nil
	}
	if conn == nil {
		var err error
		if conn, err = grpc.NewClient(addr, c.cfg.dialOpts...); err != nil {
			c.mu.Unlock()
			return nil, &Error{Code: CodeUnavailable, Message: fmt.Sprintf("connect to leader %s: %v", addr, err)}
		}
		if c.leaders == nil {
			c.leaders = make(map[string]*grpc.ClientConn)
		}
		c.leaders[addr] = conn
	}
	c.mu.Unlock()
	if err := waitReady(ctx, conn, leaderConnectTimeout); err != nil {
		c.mu.Lock()
		ours := c.leaders[addr] == conn // else another caller replaced it: its verdict counts
		if ours {
			delete(c.leaders, addr)
			conn.Close()
		}
		if ours && ctx.Err() == nil {
			if c.unreachable == nil {
				c.unreachable = make(map[string]time.Time)
			}
			c.unreachable[addr] = time.Now().Add(avoidAfterFailedConnect)
		}
		c.mu.Unlock()
		return nil, fmt.Errorf("connect to leader %s: %w", addr, err)
	}
	return hermesv1.NewHermesClient(conn), nil
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
	var last error // the previous attempt's retriable error
	for attempt := 1; ; attempt++ {
		err := fromRPC(ctx, rpc(ctx))
		if err != nil && last != nil && (ctx.Err() != nil || errors.Is(err, context.DeadlineExceeded)) {
			// The deadline cut a retry: say why the call was retried.
			return fmt.Errorf("%w (the attempt before failed: %v)", err, last)
		}
		if err == nil || !isRetriable(err) || attempt >= c.retry.MaxAttempts {
			return err
		}
		c.log.Debug("hermes: retrying call", "attempt", attempt, "err", err)
		if werr := sleepCtx(ctx, c.retry.delay(attempt, retryAfter(err))); werr != nil {
			return err
		}
		last = err
	}
}
