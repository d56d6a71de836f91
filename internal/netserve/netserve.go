// Package netserve accepts the connections of the protocol adapters that
// speak over raw TCP (Kafka, hermes-wire): a goroutine per connection,
// and a Close that closes the listener and every open connection, so that
// Wait can wait for their goroutines.
package netserve

import (
	"errors"
	"net"
	"sync"
	"time"
)

// Server tracks one listener's connections. The zero value is ready.
type Server struct {
	mu     sync.Mutex
	ln     net.Listener
	conns  map[net.Conn]struct{}
	closed bool
	wg     sync.WaitGroup
}

// Serve accepts connections on ln until Close and runs handle for each
// on its own goroutine; the connection is closed when handle returns.
// It returns nil after Close (at once if Close came first), else the
// error that stopped it. Temporary accept errors are retried.
func (s *Server) Serve(ln net.Listener, handle func(net.Conn)) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		ln.Close()
		return nil
	}
	s.ln = ln
	s.mu.Unlock()
	for {
		nc, err := ln.Accept()
		if err != nil {
			if s.Closed() {
				return nil
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				time.Sleep(10 * time.Millisecond)
				continue
			}
			return err
		}
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			nc.Close()
			return nil
		}
		if s.conns == nil {
			s.conns = make(map[net.Conn]struct{})
		}
		s.conns[nc] = struct{}{}
		s.wg.Add(1)
		s.mu.Unlock()
		go func() {
			defer s.wg.Done()
			defer func() {
				nc.Close()
				s.mu.Lock()
				delete(s.conns, nc)
				s.mu.Unlock()
			}()
			handle(nc)
		}()
	}
}

// Go runs f on a goroutine that Wait waits for; false (f not run) once
// Close was called.
func (s *Server) Go(f func()) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		f()
	}()
	return true
}

// Closed reports whether Close was called.
func (s *Server) Closed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed
}

// Close stops accepting and closes every open connection; it reports
// whether this call closed the server (false: it was already closed).
func (s *Server) Close() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	s.closed = true
	if s.ln != nil {
		s.ln.Close()
	}
	for nc := range s.conns {
		nc.Close()
	}
	return true
}

// Wait waits for the goroutines of the connections and of Go.
func (s *Server) Wait() { s.wg.Wait() }
