package broker

import (
	"context"
	"time"

	"github.com/hermes-mq/hermes/pkg/record"
)

// API is the broker as the protocol adapters see it (gRPC, REST, GraphQL,
// and those to come): every request a client can make of a node. *Broker
// implements it. Adapters depend on this interface only — they decode a
// request, call one method, and encode the answer or map the error — and
// their unit tests run against fakes of it.
//
// Every method that acts for a client takes the request's context: it
// bounds the call, and it carries the principal the adapter authenticated
// (WithPrincipal). Each such method asks the node's Authorizer whether
// that principal may do what it asks before acting, whatever protocol the
// request came by. The exceptions are reads of this node's own state that
// an adapter needs to route or answer a request it has authorized itself,
// and take no context: Transaction, Transactions, AbortedTxns and
// GroupCoordinator authorize nothing (the Kafka adapter asks Authorize
// for the transactional id or the group first), and SyncMetadata only
// waits for this node's metadata.
//
// Errors are of the kinds declared in errors.go, to be tested with
// errors.Is, never by their text; Code names them as every protocol shows
// them. Retriable(err) says whether the same request may be sent again
// unchanged, RetryAfter(err) how soon and LeaderAddress(err) to which
// node. Besides those a method names, any method may fail with:
//   - ErrUnauthenticated (not retriable): authentication is required and
//     the request has no principal;
//   - ErrPermissionDenied (not retriable): the principal may not do it;
//   - ErrResourceExhausted (retriable, with RetryAfter): the principal is
//     over its request or produce quota;
//   - ErrUnavailable (retriable): the node is stopping, the metadata group
//     or the partition is electing a leader, or the node a request must go
//     to cannot be reached.
//
// What a method returns is the caller's, except where it says otherwise:
// the Batches of a FetchResult or a Delivery are shared with the broker's
// caches and must not be modified.
type API interface {
	// CreateTopic creates a topic through the metadata group (defaults
	// fill cfg's zero fields) and describes it once this node applied the
	// creation. With ifNotExists an existing topic is described instead.
	// Errors: ErrInvalidTopicName; ErrInvalidArgument for a configuration
	// out of range, including a replication factor above the cluster's
	// nodes; ErrTopicExists.
	CreateTopic(ctx context.Context, name string, cfg TopicConfig, ifNotExists bool) (TopicInfo, error)
	// DeleteTopic deletes a topic, its records and its groups' committed
	// offsets on every node; its subscriptions end with ErrTopicNotFound.
	// Errors: ErrInvalidTopicName, ErrTopicNotFound.
	DeleteTopic(ctx context.Context, name string) error
	// AlterTopic changes a topic's retention, max message size or default
	// mode, or adds partitions, on every node; it returns the topic as
	// this node has it after the change. Errors: ErrInvalidTopicName,
	// ErrTopicNotFound, ErrInvalidArgument (fewer partitions, a value out
	// of range).
	AlterTopic(ctx context.Context, name string, ch TopicChange) (TopicInfo, error)
	// DeleteRecords deletes a partition's records below before (-1: up
	// to the high watermark) on every node and returns its start offset.
	// Errors: ErrTopicNotFound, ErrPartitionNotFound, ErrOffsetOutOfRange
	// (before past the high watermark), ErrInvalidArgument.
	DeleteRecords(ctx context.Context, topic string, partition int32, before int64) (int64, error)
	// PartitionOffsets returns a partition's start offset and high
	// watermark, from a node that holds it.
	PartitionOffsets(ctx context.Context, topic string, partition int32) (start, hw int64, err error)

	// Kafka transactions' coordinator state, kept in the metadata group
	// (see TxnState). The reads are this node's copy, not authorized (see
	// above). AbortedTxns returns the aborted transactions of a partition
	// whose range [first offset, marker] ends at or after from and begins
	// before to, in the order they were aborted.
	Transaction(id string) (TxnState, bool)
	Transactions() []TxnState
	AbortedTxns(topic string, partition int32, from, to int64) []AbortedTxn
	// PutTransaction stores st if the stored version is still prev (0:
	// none). Errors: ErrTxnConflict (with ErrUnavailable).
	PutTransaction(ctx context.Context, st TxnState, prev uint64, aborted []AbortedTxn) (uint64, error)
	// SyncMetadata returns once this node has applied every metadata
	// command committed before the call. Errors: ErrUnavailable.
	SyncMetadata(ctx context.Context) error
	// Topics describes every topic the principal may describe, sorted by
	// name.
	Topics(ctx context.Context) ([]TopicInfo, error)
	// Topic describes one topic. Errors: ErrInvalidTopicName,
	// ErrTopicNotFound.
	Topic(ctx context.Context, name string) (TopicInfo, error)

	// Publish publishes records, or one packed batch, and waits for their
	// acknowledgement in the request's delivery mode. The broker may
	// modify req's records and batch. If ctx ends first the records may
	// still be stored: publishing the same records again (same message
	// ids) is how to make sure, and stores them once. Errors:
	// ErrTopicNotFound, ErrPartitionNotFound, ErrInvalidArgument,
	// ErrMessageTooLarge, ErrCorruptBatch; retriable ErrResourceExhausted
	// when a bound was reached (after a bounded wait).
	Publish(ctx context.Context, req *PublishRequest) (*PublishResult, error)
	// PublishAsync is Publish without waiting for the acknowledgement:
	// done is called exactly once, from some goroutine, when the records
	// are acknowledged or have failed (a failed publish stored nothing).
	// The publishes of one goroutine keep their order in a partition. It
	// may block for a bounded time while the partition's queue is full:
	// that is the back pressure a publisher's stream feels. Once it
	// returns the broker reads req.Records no more (it stores copies):
	// the caller may reuse the memory they alias. req.Batch, unlike
	// them, is the broker's from the call on.
	PublishAsync(ctx context.Context, req *PublishRequest, done func(*PublishResult, error))
	// PublishLive publishes performance records to one partition without
	// Publish's allocations, and hands them at once, on the caller's
	// goroutine and with origin, to the LiveSink of each live
	// subscription of the partition (SubscribeOptions.Live): the
	// low-latency path. With AnyPartition it takes one record. It returns
	// the partition and the ring offset of the first record. Errors:
	// those of Publish.
	PublishLive(ctx context.Context, topic string, partition int32, recs []record.Record, origin any) (int32, int64, error)
	// Fetch returns committed records of one partition from req.Offset,
	// waiting up to req.MaxWait for some: whole batches, the first of
	// which may start below the offset. Errors: ErrTopicNotFound,
	// ErrPartitionNotFound, ErrInvalidArgument, ErrOffsetOutOfRange.
	Fetch(ctx context.Context, req FetchRequest) (*FetchResult, error)
	// EpochEnd returns, for a leader epoch (Raft term), the largest epoch
	// at or below it that the partition's log holds and the offset where
	// that epoch's records end (ok false: none left). Only the leader
	// answers. Errors: ErrTopicNotFound, ErrPartitionNotFound.
	EpochEnd(ctx context.Context, topic string, partition int32, epoch uint64) (term uint64, end int64, ok bool, err error)
	// OffsetForTime returns the first offset of a partition whose
	// timestamp is at or after ts (Unix ns), or its high watermark when
	// none is. Errors: ErrTopicNotFound, ErrPartitionNotFound.
	OffsetForTime(ctx context.Context, topic string, partition int32, ts int64) (int64, error)

	// Subscribe opens a subscription: a plain subscriber of some
	// partitions, or a member of a group (coordinated by one node of the
	// cluster, which may be another). Subscription documents its flow
	// control. Errors: ErrTopicNotFound, ErrPartitionNotFound,
	// ErrInvalidArgument and ErrInvalidTopicName for bad options,
	// ErrOffsetOutOfRange for a start offset outside the log; retriable
	// ErrResourceExhausted when the node's subscriptions are at their
	// bound.
	Subscribe(ctx context.Context, opts SubscribeOptions) (Subscription, error)
	// CommitOffsets sets a group's committed offsets (the next offset to
	// consume): as its member member, which must own the partitions, or,
	// with member "", as an administrator. Durable (replicated) when it
	// returns nil. Errors: ErrInvalidTopicName, ErrInvalidArgument,
	// ErrUnknownMember, ErrNotAssigned, ErrGroupNotEmpty (an
	// administrator's commit on a partition a live member owns),
	// ErrTopicNotFound, ErrPartitionNotFound, ErrOffsetOutOfRange.
	CommitOffsets(ctx context.Context, group, member string, offsets []Offset) error
	// DeleteGroup forgets a group's committed offsets; only the group
	// coordinator does it. Errors: ErrInvalidTopicName, ErrGroupNotEmpty
	// while it has live members, ErrGroupNotFound without offsets.
	DeleteGroup(ctx context.Context, group string) error
	// GroupCoordinator returns the node coordinating consumer groups.
	// Errors: retriable ErrUnavailable during an election.
	GroupCoordinator() (uint64, error)
	// ListGroups lists the groups the principal may describe that have
	// live members or committed offsets, sorted by name.
	ListGroups(ctx context.Context) ([]GroupSummary, error)
	// DescribeGroup describes a group: its members, and for every
	// partition of the topics it consumes its committed offset, lag and
	// owner. Errors: ErrInvalidTopicName, ErrGroupNotFound.
	DescribeGroup(ctx context.Context, group string) (*GroupDescription, error)

	// Placement reports, for each partition of a topic, its replicas and,
	// where this node holds one, its leader and the leader's Raft term.
	// Needs describe on the topic. Errors: ErrInvalidTopicName,
	// ErrTopicNotFound.
	Placement(ctx context.Context, topic string) ([]PartitionPlacement, error)
	// Nodes lists the cluster's nodes and the addresses they advertise;
	// clients need them to route, so it needs no authorization.
	Nodes() []ClusterNode

	// DescribeCluster reports the nodes and every partition's leader,
	// replicas and (where this node leads) its followers' lag.
	DescribeCluster(ctx context.Context) (ClusterStatus, error)
	// AddNode adds a node, started to join and listening for other nodes
	// at raftAddr, to the cluster. Errors: ErrInvalidArgument.
	AddNode(ctx context.Context, id uint64, raftAddr string) error
	// RemoveNode takes a node out of the cluster. Errors:
	// ErrInvalidArgument while it holds partition replicas.
	RemoveNode(ctx context.Context, id uint64) error
	// Rebalance starts replica moves that spread the partitions' replicas
	// evenly over the nodes, moving every replica off the drained ones,
	// and returns them; they go on in the background.
	Rebalance(ctx context.Context, drain []uint64) ([]Move, error)
	// CancelMoves stops the replica moves in progress and returns them.
	CancelMoves(ctx context.Context) ([]Move, error)

	// Authenticate establishes the principal of a request from the
	// credentials it presented (see Broker.Authenticate); adapters call it
	// once per request or stream and put the principal on the context.
	// Errors: ErrUnauthenticated.
	Authenticate(ctx context.Context, c Credentials) (Principal, error)
	// StartSCRAM begins a SASL SCRAM exchange (SCRAM-SHA-256 or
	// SCRAM-SHA-512) against the users' stored credentials. Errors:
	// ErrInvalidArgument for another mechanism.
	StartSCRAM(mechanism, addr string) (SCRAMExchange, error)
	// AuthRequired reports whether requests must be authenticated.
	AuthRequired() bool
	// Authorize asks whether the request's principal may do a on r, for
	// what adapters guard themselves (GraphQL introspection). Errors:
	// ErrUnauthenticated, ErrPermissionDenied.
	Authorize(ctx context.Context, a Action, r Resource) error
	// WhoAmI returns the request's principal.
	WhoAmI(ctx context.Context) Principal

	// Users, API tokens, ACLs and quotas (security.go). Changing them
	// needs the right to alter the cluster, listing them to describe it;
	// a user may change its own password and manage its own tokens.
	// Errors: ErrInvalidArgument, ErrAlreadyExists, ErrNotFound.
	CreateUser(ctx context.Context, name, password string) error
	SetPassword(ctx context.Context, name, password string) error
	DeleteUser(ctx context.Context, name string) error
	Users(ctx context.Context) ([]UserInfo, error)
	CreateToken(ctx context.Context, principal string, ttl time.Duration, description string) (TokenInfo, string, error)
	RevokeToken(ctx context.Context, id string) error
	Tokens(ctx context.Context) ([]TokenInfo, error)
	AddACLs(ctx context.Context, acls []ACL) error
	RemoveACLs(ctx context.Context, filters []ACLFilter) (int, error)
	ACLs(ctx context.Context, filter ACLFilter) ([]ACL, error)
	SetQuota(ctx context.Context, principal string, q Quota) error
	Quotas(ctx context.Context) (map[string]Quota, error)

	// NodeID is this node's id.
	NodeID() uint64
	// Ready reports whether the node serves requests.
	Ready() bool
	// Draining is closed when the node starts a graceful stop: streams
	// (publish streams, subscriptions) answer what they accepted and end
	// with ErrUnavailable.
	Draining() <-chan struct{}
}

var _ API = (*Broker)(nil)
