package replication

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"sync"
	"time"
	"unicode/utf8"

	"google.golang.org/grpc/credentials"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	tpb "github.com/hermes-mq/hermes/internal/replication/transportpb"
	"github.com/hermes-mq/hermes/internal/tlsconf"
)

// The framed Raft stream carries a node's Raft messages to a peer over a
// plain TCP (or TLS) connection on the peer's node listener, beside its
// gRPC services. It replaces the gRPC stream for the hot path: a batch is
// written by the peer's sender goroutine in one system call and handed to
// its groups by the goroutine that reads it, where gRPC adds a writer
// goroutine, HTTP/2 framing and flow control on one end and a hand-off to
// the stream's handler on the other; on a 3-node cluster these sat in
// every round trip of a durable publish.
//
// A connection starts with a hello, the magic and the sender's node id
// (little-endian u64); the listener answers with the magic, which tells
// the sender the peer speaks framed streams (a node of an earlier version
// answers with HTTP/2's settings, or picks h2 in the TLS handshake, and
// the sender uses the gRPC stream instead). After the
// hello, the sender writes frames and the listener only reads: each frame
// is a little-endian u32 length and a tpb.Batch of that many bytes. With
// node TLS, the sender asks for the ALPN protocol framedALPN (or h2, which
// a node of an earlier version picks), and the listener admits only a
// member node whose certificate names the node id of the hello.
const (
	framedALPN = "hermes-raft/1"
	// handshakeTimeout bounds a connection's TLS handshake and hello.
	handshakeTimeout = 10 * time.Second
	// frameWriteTimeout bounds one frame's write: a peer that stops
	// reading (paused, or its process gone without a reset) has its
	// connection cut and dialled again.
	frameWriteTimeout = 15 * time.Second
	// keepAlive is the TCP keepalive of framed connections, both ends: a
	// peer gone silent is found within about 20 s.
	keepAlive = 5 * time.Second
	// userTimeout bounds how long sent data may stay unacknowledged
	// before the kernel gives the connection up (Linux: TCP_USER_TIMEOUT):
	// a partitioned peer's connection fails, and is dialled again, within
	// it; without it, retransmissions back off for minutes.
	userTimeout = 10 * time.Second
	// frameBufferKeep is the largest frame buffer a connection keeps
	// between frames.
	frameBufferKeep = 4 << 20
	// frameChunk is how much of a frame is read, or written under one
	// write deadline, at a time.
	frameChunk = 1 << 20
	// frameTarget is the size at which a sender ends a frame and writes
	// it (a frame is this, plus at most one message): frames stay within
	// the buffers both ends keep.
	frameTarget = 1 << 20
)

var framedMagic = [8]byte{'H', 'R', 'A', 'F', 'T', 0, 0, 1}

// errNotFramed is a peer that does not speak the framed stream.
var errNotFramed = errors.New("the peer does not speak the framed Raft stream")

var keepAliveConfig = net.KeepAliveConfig{Enable: true, Idle: keepAlive, Interval: keepAlive, Count: 3}

// Listen serves the node listener lis: framed Raft streams are served by
// the transport; every other connection (gRPC, already through its TLS
// handshake with node TLS) is returned by the listener Listen returns,
// which is the one to give the node's gRPC server (with ServerOptions).
// Closing that listener closes lis.
func (t *NodeTransport) Listen(lis net.Listener) net.Listener {
	m := &muxListener{Listener: lis, conns: make(chan net.Conn), done: make(chan struct{})}
	go m.accept(t)
	return m
}

// muxListener hands the gRPC server the connections that are not framed
// Raft streams.
type muxListener struct {
	net.Listener
	conns chan net.Conn
	done  chan struct{}
	once  sync.Once
}

func (m *muxListener) Accept() (net.Conn, error) {
	select {
	case c := <-m.conns:
		return c, nil
	case <-m.done:
		return nil, net.ErrClosed
	}
}

func (m *muxListener) Close() error {
	m.once.Do(func() { close(m.done) })
	return m.Listener.Close()
}

// accept hands every accepted connection to classify until the
// listener closes. Any other failure (out of file descriptors, say) is
// waited out, backing off from 5 ms to 1 s, as net/http and gRPC do: the
// node's listener must not stop for good on a passing shortage.
func (m *muxListener) accept(t *NodeTransport) {
	var backoff time.Duration
	for {
		c, err := m.Listener.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				m.once.Do(func() { close(m.done) })
				return
			}
			backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
			t.log.Warn("node listener: accept failed, retrying", "err", err, "in", backoff)
			select {
			case <-time.After(backoff):
				continue
			case <-m.done:
				return
			}
		}
		backoff = 0
		go t.classify(c, m)
	}
}

// classify sorts an accepted connection: a framed Raft stream is served
// here, anything else goes to the gRPC server.
func (t *NodeTransport) classify(c net.Conn, m *muxListener) {
	raw := c
	c.SetDeadline(time.Now().Add(handshakeTimeout))
	var certified uint64
	if t.tls != nil {
		tc := tls.Server(c, t.tls.listenerConfig())
		if err := tc.Handshake(); err != nil {
			t.log.Debug("node listener: TLS handshake failed", "addr", c.RemoteAddr(), "err", err)
			c.Close()
			return
		}
		st := tc.ConnectionState()
		if st.NegotiatedProtocol != framedALPN {
			if st.NegotiatedProtocol != "h2" {
				t.log.Debug("node listener: connection refused: neither gRPC nor a framed Raft stream", "addr", c.RemoteAddr(), "alpn", st.NegotiatedProtocol)
				c.Close()
				return
			}
			c.SetDeadline(time.Time{})
			m.hand(tc)
			return
		}
		id, ok := tlsconf.NodeID(st.PeerCertificates[0])
		if !ok {
			t.log.Warn("raft transport: connection refused: the peer's certificate names no node", "addr", c.RemoteAddr())
			c.Close()
			return
		}
		if !t.tls.isMember(id) {
			t.log.Warn("raft transport: connection refused: not a member of the cluster", "node", id, "addr", c.RemoteAddr())
			c.Close()
			return
		}
		certified = id
		c = tc
	}
	var hello [16]byte
	if _, err := io.ReadFull(c, hello[:8]); err != nil {
		c.Close()
		return
	}
	if [8]byte(hello[:8]) != framedMagic {
		if t.tls != nil { // asked for framedALPN, then sent something else
			t.log.Warn("raft transport: connection refused: a bad hello", "addr", c.RemoteAddr())
			c.Close()
			return
		}
		c.SetDeadline(time.Time{})
		m.hand(&prefixConn{Conn: c, r: io.MultiReader(bytes.NewReader(bytes.Clone(hello[:8])), c)})
		return
	}
	if _, err := io.ReadFull(c, hello[8:]); err != nil {
		c.Close()
		return
	}
	from := binary.LittleEndian.Uint64(hello[8:])
	if t.tls != nil && from != certified {
		t.log.Warn("raft transport: connection refused: its sender is not the node its certificate names", "from", from, "certificate", certified, "addr", c.RemoteAddr())
		c.Close()
		return
	}
	if !t.addInbound(c) {
		c.Close()
		return
	}
	defer t.dropInbound(c)
	if _, err := c.Write(framedMagic[:]); err != nil {
		return
	}
	c.SetDeadline(time.Time{})
	if tc, ok := raw.(*net.TCPConn); ok {
		tc.SetKeepAliveConfig(keepAliveConfig)
	}
	if err := t.readFrames(c, from); err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) {
		t.log.Debug("raft transport: framed stream from peer ended", "peer", from, "err", err)
	}
}

// hand gives the gRPC server a connection (closed if the listener is).
func (m *muxListener) hand(c net.Conn) {
	select {
	case m.conns <- c:
	case <-m.done:
		c.Close()
	}
}

// prefixConn is a connection whose first bytes were read already.
type prefixConn struct {
	net.Conn
	r io.Reader
}

func (c *prefixConn) Read(p []byte) (int, error) { return c.r.Read(p) }

// readFrames hands the batches of a framed stream from node from to their
// groups until the connection ends. A frame out of bounds, or one that
// does not decode, ends the stream.
func (t *NodeTransport) readFrames(c net.Conn, from uint64) error {
	r := bufio.NewReaderSize(c, transportBufferBytes)
	var head [4]byte
	var buf []byte
	var envs []frameEnvelope
	for {
		if _, err := io.ReadFull(r, head[:]); err != nil {
			return err
		}
		n := binary.LittleEndian.Uint32(head[:])
		if n > maxNodeMessageBytes {
			t.log.Warn("raft transport: framed stream cut: a frame beyond the bound", "peer", from, "bytes", n, "max", maxNodeMessageBytes)
			return fmt.Errorf("frame of %d bytes", n)
		}
		// Read in chunks: what a frame takes in memory follows the bytes
		// that arrived, not the length its first four bytes claim.
		buf = buf[:0]
		for len(buf) < int(n) {
			chunk := min(int(n)-len(buf), frameChunk)
			buf = slices.Grow(buf, chunk)
			m, err := io.ReadFull(r, buf[len(buf):len(buf)+chunk])
			buf = buf[:len(buf)+m]
			if err != nil {
				return err
			}
		}
		sender, got, err := decodeFrame(buf, envs)
		envs = got
		if err != nil {
			t.log.Warn("raft transport: framed stream cut: a frame that does not decode", "peer", from, "err", err)
			return err
		}
		if sender != from {
			t.log.Warn("raft transport: framed stream cut: a batch of another sender", "peer", from, "from", sender)
			return fmt.Errorf("batch from %d on the stream of %d", sender, from)
		}
		for i, e := range envs {
			t.deliverEnvelope(from, string(e.group), e.msg, e.beat)
			envs[i] = frameEnvelope{}
		}
		if cap(buf) > frameBufferKeep {
			buf = nil
		}
	}
}

// addInbound notes a served framed connection, for Close (false: the
// transport is closed).
func (t *NodeTransport) addInbound(c net.Conn) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	select {
	case <-t.stop:
		return false
	default:
	}
	if t.inbound == nil {
		t.inbound = make(map[net.Conn]struct{})
	}
	t.inbound[c] = struct{}{}
	t.wg.Add(1)
	return true
}

func (t *NodeTransport) dropInbound(c net.Conn) {
	t.mu.Lock()
	delete(t.inbound, c)
	t.mu.Unlock()
	c.Close()
	t.wg.Done()
}

// closeInbound cuts every served framed connection (Close).
func (t *NodeTransport) closeInbound() {
	t.mu.Lock()
	defer t.mu.Unlock()
	for c := range t.inbound {
		c.Close()
	}
}

// streamFramed dials p and sends it what is queued, in frames, until the
// connection fails or the transport closes; errNotFramed when the peer
// does not speak framed streams. A frame whose write failed is kept
// (p.unsent), with the messages of its batch not yet framed (p.rest), and
// written first on the next connection: a peer that restarted gets them
// instead of losing them.
func (t *NodeTransport) streamFramed(p *peer) error {
	ctx, cancel := t.stopContext()
	defer cancel()
	c, raw, err := t.dialFramed(ctx, p)
	if err != nil {
		return err
	}
	// Closing the TCP connection, not the TLS one, which would first try
	// to say so to a peer that may not read (seconds).
	defer raw.Close()
	context.AfterFunc(ctx, func() { raw.Close() }) // Close cuts a blocked write
	// The peer never writes after the hello: a read returns when it
	// closes or resets the connection, which is then closed here, so
	// that the next write fails at once instead of vanishing into a dead
	// socket.
	go func() {
		var one [1]byte
		c.Read(one[:])
		raw.Close()
	}()
	if p.unsent != nil {
		if err := writeFrame(c, p.unsent); err != nil {
			return err
		}
		p.unsent = nil
	}
	var buf []byte
	var out []outbound
	if p.rest != nil {
		out, p.rest = p.rest, nil
		if buf, err = t.writeBatch(c, p, buf, out); err != nil {
			return err
		}
	}
	for t.nextBatch(p, &out) {
		if buf, err = t.writeBatch(c, p, buf, out); err != nil {
			return err
		}
		if cap(buf) > frameBufferKeep {
			buf = nil
		}
	}
	return nil
}

// writeBatch writes the messages of out to c in frames of about
// frameTarget bytes (a frame is a tpb.Batch, encoded here so that each
// Raft message is marshaled straight into the frame: one copy of its
// entries, into a buffer used again for every frame). A message that does
// not marshal, or is beyond the bound of a frame, is dropped (raft sends
// again). When a write fails, its frame and the messages not yet framed
// are kept in p for the next connection. It returns buf, for the next
// batch.
func (t *NodeTransport) writeBatch(c net.Conn, p *peer, buf []byte, out []outbound) ([]byte, error) {
	defer clear(out)
	buf = startFrame(buf[:0], t.self)
	framed := 0 // messages in buf
	for i, o := range out {
		if framed > 0 && len(buf) >= frameTarget {
			if err := finishFrame(c, p, buf); err != nil {
				p.rest = slices.Clone(out[i:])
				return buf, err
			}
			buf, framed = startFrame(buf[:0], t.self), 0
		}
		mark := len(buf)
		var err error
		if buf, err = appendEnvelope(buf, o); err != nil {
			t.log.Warn("raft transport: a message that does not marshal dropped", "peer", p.id, "group", o.group, "err", err)
			buf = buf[:mark]
			continue
		}
		if len(buf)-4 > maxNodeMessageBytes {
			t.log.Warn("raft transport: a message beyond the bound dropped", "peer", p.id, "group", o.group, "bytes", len(buf)-mark)
			buf = buf[:mark]
			continue
		}
		framed++
	}
	if framed > 0 {
		if err := finishFrame(c, p, buf); err != nil {
			return buf, err
		}
	}
	return buf, nil
}

// startFrame begins a frame in buf: room for its length, and the batch's
// sender (tpb.Batch field 1).
func startFrame(buf []byte, self uint64) []byte {
	buf = append(buf, 0, 0, 0, 0)
	buf = protowire.AppendTag(buf, 1, protowire.VarintType)
	return protowire.AppendVarint(buf, self)
}

// finishFrame writes the frame's length and the frame; a frame whose write
// fails is kept in p.unsent.
func finishFrame(c net.Conn, p *peer, buf []byte) error {
	binary.LittleEndian.PutUint32(buf, uint32(len(buf)-4))
	if err := writeFrame(c, buf); err != nil {
		p.unsent = bytes.Clone(buf)
		return err
	}
	return nil
}

// appendEnvelope appends o to a frame as tpb.Batch field 2, a
// tpb.Envelope: its group (1), and the marshaled Raft message (2) or the
// heartbeat (3). The bytes are those proto.Marshal makes of the same
// Envelope in a Batch.
func appendEnvelope(buf []byte, o outbound) ([]byte, error) {
	var inner proto.Message = o.msg
	field := protowire.Number(2)
	if o.beat != nil {
		inner, field = o.beat, 3
	}
	n := proto.Size(inner)
	size := 0
	if o.group != "" {
		size += protowire.SizeTag(1) + protowire.SizeBytes(len(o.group))
	}
	if n > 0 || o.beat != nil { // proto3: an empty bytes field is left out, a set message is not
		size += protowire.SizeTag(field) + protowire.SizeBytes(n)
	}
	buf = protowire.AppendTag(buf, 2, protowire.BytesType)
	buf = protowire.AppendVarint(buf, uint64(size))
	if o.group != "" {
		buf = protowire.AppendTag(buf, 1, protowire.BytesType)
		buf = protowire.AppendString(buf, o.group)
	}
	if n == 0 && o.beat == nil {
		return buf, nil
	}
	buf = protowire.AppendTag(buf, field, protowire.BytesType)
	buf = protowire.AppendVarint(buf, uint64(n))
	at := len(buf)
	buf, err := proto.MarshalOptions{UseCachedSize: true}.MarshalAppend(buf, inner)
	if err != nil {
		return buf, err
	}
	if len(buf)-at != n {
		return buf, fmt.Errorf("a message of %d bytes marshaled to %d", n, len(buf)-at)
	}
	return buf, nil
}

// decodeFrame reads a frame's tpb.Batch as proto.Unmarshal would, with no
// copy of its messages' bytes (they alias frame until delivered), and
// checks its sender; its envelopes are put in envs (reused).
func decodeFrame(frame []byte, envs []frameEnvelope) (from uint64, _ []frameEnvelope, err error) {
	envs = envs[:0]
	for len(frame) > 0 {
		num, typ, n := consumeTag(frame)
		if n < 0 {
			return 0, envs, protowire.ParseError(n)
		}
		frame = frame[n:]
		switch {
		case num == 1 && typ == protowire.VarintType:
			from, n = protowire.ConsumeVarint(frame)
		case num == 2 && typ == protowire.BytesType:
			var b []byte
			if b, n = protowire.ConsumeBytes(frame); n >= 0 {
				var e frameEnvelope
				if e, err = decodeEnvelope(b); err != nil {
					return 0, envs, err
				}
				envs = append(envs, e)
			}
		default: // unknown, or of another wire type: skipped, as proto.Unmarshal does
			n = protowire.ConsumeFieldValue(num, typ, frame)
		}
		if n < 0 {
			return 0, envs, protowire.ParseError(n)
		}
		frame = frame[n:]
	}
	return from, envs, nil
}

// consumeTag is protowire.ConsumeTag refusing field numbers beyond the
// valid range, as proto.Unmarshal does.
func consumeTag(b []byte) (protowire.Number, protowire.Type, int) {
	num, typ, n := protowire.ConsumeTag(b)
	if n >= 0 && num > protowire.MaxValidNumber {
		return 0, 0, -2 // protowire.ParseError: an invalid field number
	}
	return num, typ, n
}

// frameEnvelope is a tpb.Envelope of a received frame: group, and msg (a
// marshaled Raft message, aliasing the frame) or beat.
type frameEnvelope struct {
	group []byte
	msg   []byte
	beat  *tpb.Beat
}

func decodeEnvelope(b []byte) (frameEnvelope, error) {
	var e frameEnvelope
	for len(b) > 0 {
		num, typ, n := consumeTag(b)
		if n < 0 {
			return e, protowire.ParseError(n)
		}
		b = b[n:]
		if num >= 1 && num <= 3 && typ == protowire.BytesType {
			var v []byte
			if v, n = protowire.ConsumeBytes(b); n < 0 {
				return e, protowire.ParseError(n)
			}
			switch num {
			case 1:
				if !utf8.Valid(v) {
					return e, errors.New("a group name that is not UTF-8")
				}
				e.group = v
			case 2:
				e.msg = v
			case 3:
				if e.beat == nil {
					e.beat = &tpb.Beat{}
				}
				// Merged, as repeated occurrences of a message field are.
				if err := (proto.UnmarshalOptions{Merge: true}).Unmarshal(v, e.beat); err != nil {
					return e, err
				}
			}
		} else if n = protowire.ConsumeFieldValue(num, typ, b); n < 0 {
			return e, protowire.ParseError(n)
		}
		b = b[n:]
	}
	return e, nil
}

// writeFrame writes a frame in chunks, each under its own deadline: a
// large frame to a slow peer is not cut for its size, one to a peer that
// stopped reading is.
func writeFrame(c net.Conn, frame []byte) error {
	for len(frame) > 0 {
		n := min(len(frame), frameChunk)
		c.SetWriteDeadline(time.Now().Add(frameWriteTimeout))
		if _, err := c.Write(frame[:n]); err != nil {
			return err
		}
		frame = frame[n:]
	}
	return nil
}

// dialFramed opens a framed stream to p (TCP, TLS with node TLS, the
// hello and its answer) and returns it and its TCP connection.
func (t *NodeTransport) dialFramed(ctx context.Context, p *peer) (net.Conn, net.Conn, error) {
	d := net.Dialer{Timeout: handshakeTimeout, KeepAliveConfig: keepAliveConfig, Control: setUserTimeout}
	raw, err := d.DialContext(ctx, "tcp", p.addr)
	if err != nil {
		return nil, nil, err
	}
	ok := false
	defer func() {
		if !ok {
			raw.Close()
		}
	}()
	raw.SetDeadline(time.Now().Add(handshakeTimeout))
	c := raw
	if t.tls != nil {
		cfg, err := t.tls.clientConfig(p.id)
		if err != nil {
			return nil, nil, err
		}
		// HTTP/2 too: a node of an earlier version, which offers only
		// that, then completes the handshake and says what it speaks.
		cfg.NextProtos = []string{framedALPN, "h2"}
		cfg.ServerName, _, _ = net.SplitHostPort(p.addr)
		tc := tls.Client(raw, cfg)
		if err := tc.HandshakeContext(ctx); err != nil {
			return nil, nil, err
		}
		if tc.ConnectionState().NegotiatedProtocol != framedALPN {
			return nil, nil, errNotFramed
		}
		c = tc
	}
	var hello [16]byte
	copy(hello[:], framedMagic[:])
	binary.LittleEndian.PutUint64(hello[8:], t.self)
	if _, err := c.Write(hello[:]); err != nil {
		return nil, nil, err
	}
	// A node that speaks framed streams answers with the magic; one of
	// an earlier version, a gRPC server, sends its HTTP/2 settings
	// first. A connection closed before any answer is only a failure
	// (a peer stopping, or refusing this node): tried again as framed.
	var answer [8]byte
	if _, err := io.ReadFull(c, answer[:]); err != nil {
		return nil, nil, err
	}
	if answer != framedMagic {
		return nil, nil, errNotFramed
	}
	raw.SetDeadline(time.Time{})
	ok = true
	return c, raw, nil
}

// listenerConfig is the node listener's TLS configuration: the node's
// own (certificate reloads included), offering framed streams and gRPC.
func (s *NodeTLS) listenerConfig() *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		GetConfigForClient: func(hello *tls.ClientHelloInfo) (*tls.Config, error) {
			c, err := s.server.GetConfigForClient(hello)
			if err != nil || c == nil {
				return c, err
			}
			c.NextProtos = []string{framedALPN, "h2"}
			return c, nil
		},
	}
}

// handshaken are the gRPC server's credentials on the node listener with
// node TLS: the listener did the handshake (Listen), these report its
// state for PeerNode and the checks of every call.
type handshaken struct{}

func (handshaken) ClientHandshake(context.Context, string, net.Conn) (net.Conn, credentials.AuthInfo, error) {
	return nil, nil, errors.New("node listener credentials do not dial")
}

func (handshaken) ServerHandshake(c net.Conn) (net.Conn, credentials.AuthInfo, error) {
	tc, ok := c.(*tls.Conn)
	if !ok {
		return nil, nil, errors.New("node listener: a connection without TLS")
	}
	return c, credentials.TLSInfo{State: tc.ConnectionState(), CommonAuthInfo: credentials.CommonAuthInfo{SecurityLevel: credentials.PrivacyAndIntegrity}}, nil
}

func (handshaken) Info() credentials.ProtocolInfo {
	return credentials.ProtocolInfo{SecurityProtocol: "tls", SecurityVersion: "1.2"}
}

func (h handshaken) Clone() credentials.TransportCredentials { return h }

func (handshaken) OverrideServerName(string) error { return nil }
