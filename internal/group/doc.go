// Package group holds the deterministic consumer-group logic of Hermes:
// partition assignment (Assign), one group's membership and assignment
// state machine (Group), and per-partition per-message ack tracking
// (Tracker).
//
// Nothing here starts a goroutine, does I/O or reads a clock. Every
// operation is an event that returns the actions the caller must take (a
// Changes value, offsets to redeliver or dead-letter), and every time-based
// decision takes `now` as an argument, so the whole package is testable
// as a script. The broker owns the timers, the network and the locking:
// values of this package are not safe for concurrent use, and the caller
// serializes calls on one Group or Tracker.
package group
