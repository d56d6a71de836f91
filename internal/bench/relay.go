package bench

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// The relay is the floor a broker's latency is measured against: a bare
// TCP forwarder of length-prefixed frames, with no topics, storage,
// acknowledgement semantics or flow control. A connection says what it is
// with its first byte: 'P' (publisher) or 'S' (subscriber, answered 'K'
// once registered). A publisher
// sends frames (u32 little-endian length, then the frame: a 16-byte
// message id and the payload); the relay writes each frame to every
// subscriber and answers the publisher with an empty frame (u32 0), in
// order. Like hermes-wire's performance path it forwards on the
// publisher's reading goroutine and writes each subscriber once per read
// batch.

// ServeRelay runs a relay on ln until ln is closed.
func ServeRelay(ln net.Listener) error {
	r := &relay{}
	for {
		nc, err := ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return nil
			}
			return err
		}
		if tc, ok := nc.(*net.TCPConn); ok {
			tc.SetNoDelay(true)
		}
		go r.serve(nc)
	}
}

type relay struct {
	subs atomic.Pointer[[]*relayConn] // copy on write under mu
	mu   sync.Mutex
}

type relayConn struct {
	mu    sync.Mutex
	bw    *bufio.Writer
	dirty bool
}

func (r *relay) serve(nc net.Conn) {
	defer nc.Close()
	var role [1]byte
	if _, err := io.ReadFull(nc, role[:]); err != nil {
		return
	}
	switch role[0] {
	case 'S':
		s := &relayConn{bw: bufio.NewWriterSize(nc, 64<<10)}
		r.mu.Lock()
		subs := append(append([]*relayConn(nil), r.loadSubs()...), s)
		r.subs.Store(&subs)
		r.mu.Unlock()
		// 'K' only once registered: a publisher that starts when the
		// subscriber has its answer must not send a frame past it.
		if _, err := nc.Write([]byte{'K'}); err == nil {
			io.Copy(io.Discard, nc) // until the subscriber goes
		}
		r.mu.Lock()
		var rest []*relayConn
		for _, o := range r.loadSubs() {
			if o != s {
				rest = append(rest, o)
			}
		}
		r.subs.Store(&rest)
		r.mu.Unlock()
	case 'P':
		r.forward(nc)
	}
}

func (r *relay) loadSubs() []*relayConn {
	if p := r.subs.Load(); p != nil {
		return *p
	}
	return nil
}

// forward reads a publisher's frames and writes them to every subscriber.
func (r *relay) forward(nc net.Conn) {
	br := bufio.NewReaderSize(nc, 64<<10)
	acks := bufio.NewWriterSize(nc, 16<<10)
	var hdr [4]byte
	var body []byte
	var touched []*relayConn
	for {
		if _, err := io.ReadFull(br, hdr[:]); err != nil {
			return
		}
		n := int(binary.LittleEndian.Uint32(hdr[:]))
		if n > 64<<20 {
			return
		}
		if cap(body) < n {
			body = make([]byte, n)
		}
		body = body[:n]
		if _, err := io.ReadFull(br, body); err != nil {
			return
		}
		for _, s := range r.loadSubs() {
			s.mu.Lock()
			s.bw.Write(hdr[:])
			s.bw.Write(body)
			if !s.dirty {
				s.dirty = true
				touched = append(touched, s)
			}
			s.mu.Unlock()
		}
		acks.Write([]byte{0, 0, 0, 0})
		if br.Buffered() == 0 {
			for _, s := range touched {
				s.mu.Lock()
				s.bw.Flush()
				s.dirty = false
				s.mu.Unlock()
			}
			touched = touched[:0]
			if acks.Flush() != nil {
				return
			}
		}
	}
}

// relayTarget runs the workload through a relay: one it starts (a child
// `hermes bench relay` process, whose CPU is reported as the broker's)
// or the one at -relay-addr.
type relayTarget struct {
	cfg  *Config
	addr string
	cmd  *exec.Cmd
}

func openRelay(ctx context.Context, cfg *Config) (*relayTarget, error) {
	r := &relayTarget{cfg: cfg, addr: cfg.RelayAddr}
	if r.addr != "" {
		return r, nil
	}
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	r.cmd = exec.Command(exe, "bench", "relay", "--listen", "127.0.0.1:0")
	out, err := r.cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := r.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start the relay (%s bench relay): %w", exe, err)
	}
	line := make(chan string, 1)
	go func() {
		s := bufio.NewScanner(out)
		if s.Scan() {
			line <- s.Text()
		}
		close(line)
		io.Copy(io.Discard, out)
	}()
	select {
	case l := <-line:
		addr, ok := strings.CutPrefix(l, "relay listening on ")
		if !ok {
			r.Close()
			return nil, fmt.Errorf("the relay said %q", l)
		}
		r.addr = addr
	case <-time.After(10 * time.Second):
		r.Close()
		return nil, errors.New("the relay did not start within 10 s")
	case <-ctx.Done():
		r.Close()
		return nil, ctx.Err()
	}
	cfg.BrokerPIDs = append(cfg.BrokerPIDs, r.cmd.Process.Pid)
	return r, nil
}

func (r *relayTarget) Name() string { return "relay" }

func (r *relayTarget) Durability() string {
	return "none: a bare TCP relay forwarding each frame from memory to every subscriber (the floor)"
}

func (r *relayTarget) CreateTopics(context.Context, []string, int) error { return nil }
func (r *relayTarget) DeleteTopics(context.Context, []string) error      { return nil }
func (r *relayTarget) ErrorKind(error) string                            { return "" }

func (r *relayTarget) Close() error {
	if r.cmd != nil && r.cmd.Process != nil {
		r.cmd.Process.Kill()
		r.cmd.Wait()
	}
	return nil
}

func (r *relayTarget) dial(ctx context.Context, role byte) (net.Conn, error) {
	var d net.Dialer
	nc, err := d.DialContext(ctx, "tcp", r.addr)
	if err != nil {
		return nil, err
	}
	nc.(*net.TCPConn).SetNoDelay(true)
	if _, err := nc.Write([]byte{role}); err != nil {
		nc.Close()
		return nil, err
	}
	return nc, nil
}

func (r *relayTarget) NewPublisher(ctx context.Context, _ string, _ int, proto string) (Publisher, error) {
	nc, err := r.dial(ctx, 'P')
	if err != nil {
		return nil, err
	}
	p := &relayPublisher{nc: nc, sync: proto == ProtoGRPC, dones: make(chan Done, 1<<16), stopped: make(chan struct{})}
	go p.readAcks()
	return p, nil
}

// relayPublisher writes one frame per record; acks come back in order.
type relayPublisher struct {
	nc      net.Conn
	sync    bool
	buf     []byte
	dones   chan Done
	stopped chan struct{}
}

func (p *relayPublisher) readAcks() {
	defer close(p.stopped)
	br := bufio.NewReader(p.nc)
	var hdr [4]byte
	for done := range p.dones {
		if _, err := io.ReadFull(br, hdr[:]); err != nil {
			done(err, time.Time{})
			for d := range p.dones {
				d(err, time.Time{})
			}
			return
		}
		done(nil, time.Time{})
	}
}

func (p *relayPublisher) Publish(ctx context.Context, id [16]byte, payload []byte, done Done) {
	p.buf = binary.LittleEndian.AppendUint32(p.buf[:0], uint32(16+len(payload)))
	p.buf = append(append(p.buf, id[:]...), payload...)
	if !p.sync {
		p.dones <- done
		if _, err := p.nc.Write(p.buf); err != nil {
			p.nc.Close()
		}
		return
	}
	ch := make(chan error, 1)
	p.dones <- func(err error, _ time.Time) { ch <- err }
	if _, err := p.nc.Write(p.buf); err != nil {
		p.nc.Close()
	}
	done(<-ch, time.Time{})
}

func (p *relayPublisher) Close(ctx context.Context) error {
	close(p.dones)
	select {
	case <-p.stopped:
	case <-ctx.Done():
	}
	return p.nc.Close()
}

func (r *relayTarget) Subscribe(ctx context.Context, _ string, o SubOptions) (Subscription, error) {
	if o.Group != "" || o.FromBeginning {
		return nil, fmt.Errorf("the relay keeps nothing: it has live subscribers only: %w", ErrNotAvailable)
	}
	nc, err := r.dial(ctx, 'S')
	if err != nil {
		return nil, err
	}
	s := &relaySub{nc: nc, br: bufio.NewReaderSize(nc, 64<<10)}
	nc.SetReadDeadline(time.Now().Add(10 * time.Second))
	if k, err := s.br.ReadByte(); err != nil || k != 'K' {
		nc.Close()
		return nil, fmt.Errorf("the relay did not register the subscriber: %v", err)
	}
	nc.SetReadDeadline(time.Time{})
	return s, nil
}

// relaySub reads the relay's frames; offsets count its deliveries.
type relaySub struct {
	nc   net.Conn
	br   *bufio.Reader
	next int64
	// ctx is the context of the last Next: when it ends, the read ends.
	ctx  context.Context
	stop func() bool
	// frame holds the bytes read so far of a frame whose read a deadline
	// cut (a context that ended, or one whose timer fired late): the next
	// call goes on with it, so no frame is lost to a cut read.
	frame []byte
}

func (s *relaySub) Next(ctx context.Context) (*Delivery, error) {
	if ctx != s.ctx {
		if s.stop != nil {
			s.stop()
		}
		s.nc.SetReadDeadline(time.Time{})
		s.ctx, s.stop = ctx, context.AfterFunc(ctx, func() { s.nc.SetReadDeadline(time.Now()) })
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := s.fill(4); err != nil {
		return nil, err
	}
	n := int(binary.LittleEndian.Uint32(s.frame))
	if n < 16 || n > 64<<20 {
		return nil, fmt.Errorf("relay frame of %d bytes", n)
	}
	if err := s.fill(4 + n); err != nil {
		return nil, err
	}
	body := s.frame[4:]
	s.frame = nil
	d := &Delivery{HasID: true, Offset: s.next, Payload: body[16:]}
	copy(d.ID[:], body)
	s.next++
	return d, nil
}

// fill reads until s.frame holds n bytes, keeping what it read on an
// error.
func (s *relaySub) fill(n int) error {
	if len(s.frame) >= n {
		return nil
	}
	if cap(s.frame) < n {
		s.frame = append(make([]byte, 0, n), s.frame...)
	}
	m, err := io.ReadFull(s.br, s.frame[len(s.frame):n])
	s.frame = s.frame[:len(s.frame)+m]
	return err
}

func (s *relaySub) Commit(context.Context) error { return nil }
func (s *relaySub) Close() error                 { return s.nc.Close() }
func (s *relaySub) Abort()                       { s.nc.Close() }
func (s *relaySub) Missed() int64                { return 0 }
