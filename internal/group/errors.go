package group

import "errors"

var (
	// ErrUnknownMember is returned for a member id that is not in the group
	// (never joined, left, or expired). Retriable by joining again.
	ErrUnknownMember = errors.New("group: unknown member")

	// ErrMemberExists is returned by Join when the member id is already in
	// the group subscribed to a different topic. Joining again with the
	// same topic is not an error (it is a heartbeat).
	ErrMemberExists = errors.New("group: member already joined with another topic")

	// ErrGroupFull is returned by Join when the group already holds
	// Config.MaxMembers members.
	ErrGroupFull = errors.New("group: too many members")

	// ErrInvalidArgument is returned for an empty member id or topic name.
	ErrInvalidArgument = errors.New("group: invalid argument")

	// ErrInvalidPartitions is returned for a partition count < 1 or
	// > Config.MaxPartitions.
	ErrInvalidPartitions = errors.New("group: invalid partition count")

	// ErrNotPending is returned by Tracker.Ack and Tracker.Nack for an offset
	// that is not delivered-and-unacked: never delivered, or already acked.
	ErrNotPending = errors.New("group: offset not pending")
)
