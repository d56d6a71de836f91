package netserve

import (
	"io"
	"net"
	"sync/atomic"
	"testing"
	"time"
)

// TestCloseEndsConnectionsAndWaits: Close closes the listener and every
// open connection, Serve returns nil, and Wait returns once the
// handlers (and Go's functions) have.
func TestCloseEndsConnectionsAndWaits(t *testing.T) {
	var s Server
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var ended atomic.Int32
	served := make(chan error, 1)
	go func() {
		served <- s.Serve(ln, func(nc net.Conn) {
			io.Copy(io.Discard, nc) // until the connection is closed
			ended.Add(1)
		})
	}()
	stop := make(chan struct{})
	if !s.Go(func() { <-stop; ended.Add(1) }) {
		t.Fatal("Go refused before Close")
	}
	var clients []net.Conn
	for range 3 {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		clients = append(clients, c)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		s.mu.Lock()
		n := len(s.conns)
		s.mu.Unlock()
		if n == 3 || time.Now().After(deadline) {
			break
		}
		time.Sleep(time.Millisecond)
	}
	if !s.Close() || s.Close() {
		t.Fatal("Close must report true once, then false")
	}
	close(stop)
	s.Wait()
	if got := ended.Load(); got != 4 {
		t.Fatalf("%d of 4 goroutines ended", got)
	}
	if err := <-served; err != nil {
		t.Fatalf("Serve after Close: %v", err)
	}
	if s.Go(func() {}) {
		t.Fatal("Go ran after Close")
	}
	// Serve after Close returns at once and closes its listener.
	ln2, _ := net.Listen("tcp", "127.0.0.1:0")
	if err := s.Serve(ln2, func(net.Conn) {}); err != nil {
		t.Fatal(err)
	}
	if _, err := net.DialTimeout("tcp", ln2.Addr().String(), time.Second); err == nil {
		t.Fatal("the listener of a Serve after Close still accepts")
	}
}
