package kafka

import (
	"bytes"
	"crypto/tls"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/hermes-mq/hermes/internal/broker"
)

// SASL (SaslHandshake v1, SaslAuthenticate v0–v2): PLAIN (only over TLS)
// and SCRAM-SHA-256/512 against the users Hermes keeps (hermes user
// create), the same principals and ACLs as every other API. When the
// broker requires authentication, a connection may send nothing but
// ApiVersions and SASL until it has authenticated (or presented a client
// certificate); a failed authentication closes it, as Kafka does.
func init() {
	handlers[kmsg.SASLHandshake.Int16()] = handler{min: 1, max: 1, beforeAuth: true, fn: now(saslHandshake)}
	handlers[kmsg.SASLAuthenticate.Int16()] = handler{min: 0, max: 2, beforeAuth: true, fn: saslAuthenticate}
}

var saslMechanisms = []string{"PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"}

type saslState struct {
	mechanism string
	scram     broker.SCRAMExchange
	step      int
}

func saslHandshake(c *conn, req *kmsg.SASLHandshakeRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.SASLHandshakeResponse)
	resp.SupportedMechanisms = saslMechanisms
	if !contains(saslMechanisms, req.Mechanism) {
		resp.ErrorCode = kerr.UnsupportedSaslMechanism.Code
		return resp
	}
	if c.sasl.mechanism != "" {
		resp.ErrorCode = kerr.IllegalSaslState.Code
		return resp
	}
	c.sasl = saslState{mechanism: req.Mechanism}
	return resp
}

func saslAuthenticate(c *conn, r kmsg.Request, a *answer) {
	req := r.(*kmsg.SASLAuthenticateRequest)
	resp := req.ResponseKind().(*kmsg.SASLAuthenticateResponse)
	failed := func(code int16, msg string) {
		resp.ErrorCode, resp.ErrorMessage = code, &msg
		a.close = true
		a.respond(resp)
	}
	st := &c.sasl
	switch st.mechanism {
	case "":
		failed(kerr.IllegalSaslState.Code, "SaslAuthenticate before SaslHandshake")
		return
	case "PLAIN":
		if _, isTLS := c.nc.(*tls.Conn); !isTLS && !c.s.cfg.SASLPlainWithoutTLS {
			failed(kerr.SaslAuthenticationFailed.Code, "SASL PLAIN is refused without TLS: it would send the password in clear")
			return
		}
		parts := bytes.SplitN(req.SASLAuthBytes, []byte{0}, 3)
		if len(parts) != 3 || (len(parts[0]) > 0 && !bytes.Equal(parts[0], parts[1])) {
			failed(kerr.SaslAuthenticationFailed.Code, "malformed SASL PLAIN message")
			return
		}
		p, err := c.s.api.Authenticate(c.s.ctx, broker.Credentials{User: string(parts[1]), Password: string(parts[2]), Addr: c.addr})
		if err != nil || p.Name == "" {
			failed(kerr.SaslAuthenticationFailed.Code, "authentication failed: unknown user or wrong password")
			return
		}
		c.authenticatedAs(p)
		a.respond(resp)
	default: // SCRAM
		switch st.step {
		case 0:
			x, err := c.s.api.StartSCRAM(st.mechanism, c.addr)
			if err != nil {
				failed(kerr.SaslAuthenticationFailed.Code, err.Error())
				return
			}
			out, err := x.First(req.SASLAuthBytes)
			if err != nil {
				failed(kerr.SaslAuthenticationFailed.Code, "authentication failed")
				return
			}
			st.scram, st.step = x, 1
			resp.SASLAuthBytes = out
			a.respond(resp)
		case 1:
			out, p, err := st.scram.Final(req.SASLAuthBytes)
			if err != nil {
				failed(kerr.SaslAuthenticationFailed.Code, "authentication failed: unknown user or wrong password")
				return
			}
			st.step = 2
			c.authenticatedAs(p)
			resp.SASLAuthBytes = out
			a.respond(resp)
		default:
			failed(kerr.IllegalSaslState.Code, "SASL exchange already complete")
		}
	}
}

func (c *conn) authenticatedAs(p broker.Principal) {
	ctx := broker.WithPrincipal(c.base, p)
	c.ctx.Store(&ctx)
	c.authenticated = true
	c.log = c.log.With("principal", p.Name)
}

// auditUnauthenticated logs a request refused before authentication.
func (s *Server) auditUnauthenticated(c *conn, key int16) {
	s.log.Warn("request before authentication refused; connection closed", "log", "audit", "addr", c.addr,
		"action", kmsg.NameForKey(key), "result", "denied")
}
