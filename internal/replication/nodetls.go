package replication

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	grpcpeer "google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"github.com/hermes-mq/hermes/internal/tlsconf"
)

// NodeTLS makes node-to-node traffic mutual TLS: the listener takes only
// peers whose certificate the cluster's CA signed and that name a node
// (hermes://node/<id>); a dial checks that the node answering is the one
// dialled. Every node-to-node call then carries the caller's node id
// (PeerNode), which the services check against what the caller claims,
// and nodes that are not members of the cluster are refused. A nil
// *NodeTLS is plaintext: for clusters on one machine's loopback.
type NodeTLS struct {
	server *tls.Config
	files  tlsconf.Files
	log    *slog.Logger
	member atomic.Pointer[func(uint64) bool]
}

// NewNodeTLS loads node self's certificate and key and the cluster's CA
// (f.CA, required). The certificate must name node self.
func NewNodeTLS(self uint64, f tlsconf.Files, log *slog.Logger) (*NodeTLS, error) {
	if f.CA == "" || f.Cert == "" {
		return nil, fmt.Errorf("node TLS needs the node's certificate and key and the cluster's CA")
	}
	if log == nil {
		log = slog.Default()
	}
	srv, err := tlsconf.Server(f, tlsconf.RequireClientCert, log)
	if err != nil {
		return nil, err
	}
	// Checked once here: a reloaded certificate is the operator's to get
	// right (peers refuse a wrong one).
	own, err := tls.LoadX509KeyPair(f.Cert, f.Key)
	if err != nil {
		return nil, err
	}
	leaf, err := x509.ParseCertificate(own.Certificate[0])
	if err != nil {
		return nil, err
	}
	if id, ok := tlsconf.NodeID(leaf); !ok || id != self {
		return nil, fmt.Errorf("node TLS: %s is not node %d's certificate (it must carry the URI %s)", f.Cert, self, tlsconf.NodeURI(self))
	}
	return &NodeTLS{server: srv, files: f, log: log}, nil
}

// SetMembers makes the listener refuse nodes for which member is false
// (nodes removed from the cluster, or never added).
func (s *NodeTLS) SetMembers(member func(node uint64) bool) {
	if s != nil {
		s.member.Store(&member)
	}
}

// isMember reports whether node is a member (true until SetMembers).
func (s *NodeTLS) isMember(node uint64) bool {
	m := s.member.Load()
	return m == nil || (*m)(node)
}

// serverOptions are the gRPC server's credentials (the handshake is the
// node listener's, see Listen) and the check of every call's peer.
func (s *NodeTLS) serverOptions() []grpc.ServerOption {
	if s == nil {
		return nil
	}
	return []grpc.ServerOption{
		grpc.Creds(handshaken{}),
		grpc.ChainUnaryInterceptor(func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
			if err := s.checkPeer(ctx, info.FullMethod); err != nil {
				return nil, err
			}
			return h(ctx, req)
		}),
		grpc.ChainStreamInterceptor(func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) error {
			if err := s.checkPeer(ss.Context(), info.FullMethod); err != nil {
				return err
			}
			return h(srv, ss)
		}),
	}
}

// checkPeer admits a call from a member node.
func (s *NodeTLS) checkPeer(ctx context.Context, method string) error {
	id, ok := PeerNode(ctx)
	if !ok {
		s.log.Warn("node-to-node call refused: the peer's certificate names no node", "method", method, "addr", peerAddr(ctx))
		return status.Error(codes.PermissionDenied, "node-to-node services are for the cluster's nodes: the certificate names no node")
	}
	if !s.isMember(id) {
		s.log.Warn("node-to-node call refused: not a member of the cluster", "node", id, "method", method, "addr", peerAddr(ctx))
		return status.Errorf(codes.PermissionDenied, "node %d is not a member of this cluster", id)
	}
	return nil
}

func peerAddr(ctx context.Context) string {
	if p, ok := grpcpeer.FromContext(ctx); ok && p.Addr != nil {
		return p.Addr.String()
	}
	return ""
}

// clientConfig is the TLS configuration of a dial to node: the answer
// must be node's certificate, signed by the cluster's CA.
func (s *NodeTLS) clientConfig(node uint64) (*tls.Config, error) {
	return tlsconf.Client(s.files, func(leaf *x509.Certificate) error {
		if id, ok := tlsconf.NodeID(leaf); !ok || id != node {
			return fmt.Errorf("tls: dialled node %d, the certificate is node %d's", node, id)
		}
		return nil
	}, s.log)
}

// dialCreds are the credentials of a dial to node (plaintext without TLS).
func (s *NodeTLS) dialCreds(node uint64) (grpc.DialOption, error) {
	if s == nil {
		return grpc.WithTransportCredentials(insecure.NewCredentials()), nil
	}
	c, err := s.clientConfig(node)
	if err != nil {
		return nil, err
	}
	return grpc.WithTransportCredentials(credentials.NewTLS(c)), nil
}

// Probe checks that node answers at addr as a member must: with node
// TLS, a handshake in which each side accepts the other's certificate
// (the cluster's CA, naming node); without, a TCP connection.
func (t *NodeTransport) Probe(ctx context.Context, node uint64, addr string) error {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return err
	}
	defer conn.Close()
	if t.tls == nil {
		return nil
	}
	c, err := t.tls.clientConfig(node)
	if err != nil {
		return err
	}
	c.ServerName, _, _ = net.SplitHostPort(addr)
	c.NextProtos = []string{"h2"} // gRPC servers close connections that do not negotiate HTTP/2
	tc := tls.Client(conn, c)
	if err := tc.HandshakeContext(ctx); err != nil {
		return err
	}
	// TLS 1.3 reports the server's refusal of this node's certificate
	// only on the first read.
	tc.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
	if _, err := tc.Read(make([]byte, 1)); err != nil && !errors.Is(err, os.ErrDeadlineExceeded) {
		return fmt.Errorf("node %d refused this node's certificate: %w", node, err)
	}
	return nil
}

// PeerNode returns the node id of a node-to-node call's caller, as its
// certificate says (false without node TLS).
func PeerNode(ctx context.Context) (uint64, bool) {
	p, ok := grpcpeer.FromContext(ctx)
	if !ok {
		return 0, false
	}
	info, ok := p.AuthInfo.(credentials.TLSInfo)
	if !ok || len(info.State.PeerCertificates) == 0 {
		return 0, false
	}
	return tlsconf.NodeID(info.State.PeerCertificates[0])
}
