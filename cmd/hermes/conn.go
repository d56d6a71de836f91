package main

import (
	"context"
	"crypto/tls"
	"encoding/base64"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/hermes-mq/hermes/internal/tlsconf"
	"github.com/hermes-mq/hermes/pkg/client"
)

// This file holds what every client command shares: the connection
// flags (--addr, TLS, credentials, --timeout), dialling, and tables.
// Their defaults come, in this order, from the flag, the HERMES_*
// environment variable, the active profile (profile.go), and the
// built-in default.

// adminTimeout is the default --timeout of one-shot commands.
const adminTimeout = 10 * time.Second

// brokerFlags are the flags of every command that talks to a broker.
type brokerFlags struct {
	addr    string
	timeout time.Duration
	tls     tlsconf.Files // CA: the nodes' (empty: the system's roots)
	useTLS  bool
	// user and password, or token: the credentials to call with.
	user, password, token string
}

// register adds --addr (default $HERMES_ADDR, else client.DefaultAddr),
// the TLS flags and --timeout to cmd, the latter with default def (0:
// none).
func (f *brokerFlags) register(cmd *cobra.Command, def time.Duration) {
	addr := os.Getenv("HERMES_ADDR")
	if addr == "" {
		addr = client.DefaultAddr
	}
	cmd.Flags().StringVar(&f.addr, "addr", addr, "broker gRPC address, or a comma-separated list of a cluster's nodes (env HERMES_ADDR)")
	cmd.Flags().DurationVar(&f.timeout, "timeout", def, "give up after this long (0: no limit)")
	cmd.Flags().String("profile", "", "connection profile to take defaults from (env HERMES_PROFILE; default: the active one, see hermes profile)")
	f.registerTLS(cmd.Flags())
}

// registerTLS adds --tls, --tls-ca, --tls-cert and --tls-key (defaults
// from HERMES_TLS_CA, HERMES_TLS_CERT, HERMES_TLS_KEY).
func (f *brokerFlags) registerTLS(fs *pflag.FlagSet) {
	fs.BoolVar(&f.useTLS, "tls", false, "connect with TLS, verifying the broker against the system's roots (implied by --tls-ca)")
	fs.StringVar(&f.tls.CA, "tls-ca", os.Getenv("HERMES_TLS_CA"), "connect with TLS: CA (PEM) that signs the brokers' certificates (env HERMES_TLS_CA)")
	fs.StringVar(&f.tls.Cert, "tls-cert", os.Getenv("HERMES_TLS_CERT"), "TLS client certificate (PEM) to authenticate with (env HERMES_TLS_CERT)")
	fs.StringVar(&f.tls.Key, "tls-key", os.Getenv("HERMES_TLS_KEY"), "private key of --tls-cert (env HERMES_TLS_KEY)")
	fs.StringVar(&f.user, "user", os.Getenv("HERMES_USER"), "authenticate as this user (env HERMES_USER; the password from HERMES_PASSWORD or --password)")
	fs.StringVar(&f.password, "password", "", "the user's password (prefer the environment variable HERMES_PASSWORD: a flag shows in the process list)")
	fs.StringVar(&f.token, "token", "", "authenticate with this API token (prefer the environment variable HERMES_TOKEN)")
}

// credentials are the user, password and token the flags and the
// environment give.
func (f *brokerFlags) credentials() (user, password, token string) {
	token = f.token
	if token == "" {
		token = os.Getenv("HERMES_TOKEN")
	}
	password = f.password
	if password == "" {
		password = os.Getenv("HERMES_PASSWORD")
	}
	return f.user, password, token
}

// authorization is the authorization header the flags ask for ("":
// none).
func (f *brokerFlags) authorization() (string, error) {
	_, password, token := f.credentials()
	switch {
	case token != "" && f.user != "":
		return "", fmt.Errorf("--user and --token: give one")
	case token != "":
		return "Bearer " + token, nil
	case f.user != "":
		if password == "" {
			return "", fmt.Errorf("--user %s needs a password: HERMES_PASSWORD, --password, or a profile's password file", f.user)
		}
		return "Basic " + base64.StdEncoding.EncodeToString([]byte(f.user+":"+password)), nil
	}
	return "", nil
}

// clientOptions are the SDK options the flags ask for.
func (f *brokerFlags) clientOptions() ([]client.Option, error) {
	var opts []client.Option
	c, err := f.tlsConfig()
	if err != nil {
		return nil, err
	}
	if c != nil {
		opts = append(opts, client.WithTLS(c))
	}
	_, password, token := f.credentials()
	if _, err := f.authorization(); err != nil {
		return nil, err
	}
	switch {
	case token != "":
		opts = append(opts, client.WithToken(token))
	case f.user != "":
		opts = append(opts, client.WithCredentials(f.user, password))
	}
	return opts, nil
}

// tlsConfig is the client TLS configuration the flags ask for (nil:
// plaintext).
func (f *brokerFlags) tlsConfig() (*tls.Config, error) {
	if !f.useTLS && f.tls.CA == "" && !f.tls.Enabled() {
		return nil, nil
	}
	return tlsconf.Client(f.tls, nil, nil)
}

// grpcCreds are the gRPC transport credentials the flags ask for.
func (f *brokerFlags) grpcCreds() (credentials.TransportCredentials, error) {
	c, err := f.tlsConfig()
	if err != nil || c == nil {
		return insecure.NewCredentials(), err
	}
	return credentials.NewTLS(c), nil
}

// context bounds the command by --timeout.
func (f *brokerFlags) context(parent context.Context) (context.Context, context.CancelFunc) {
	if f.timeout > 0 {
		return context.WithTimeout(parent, f.timeout)
	}
	return context.WithCancel(parent)
}

// dial connects to the broker within ctx (and at most
// client.DefaultDialTimeout); extra options come after the flags' ones.
// When the connection fails, the error says why (diagnose).
func (f *brokerFlags) dial(ctx context.Context, extra ...client.Option) (*client.Client, error) {
	opts, err := f.clientOptions()
	if err != nil {
		return nil, err
	}
	c, err := client.Dial(ctx, f.addr, append(opts, extra...)...)
	if err != nil {
		return nil, f.explain(ctx, err)
	}
	return c, nil
}

// table writes rows aligned in columns; the first row is the header.
func table(w io.Writer, rows [][]string) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for _, r := range rows {
		for i, c := range r {
			if i > 0 {
				fmt.Fprint(tw, "\t")
			}
			fmt.Fprint(tw, c)
		}
		fmt.Fprintln(tw)
	}
	return tw.Flush()
}

func itoa[T ~int | ~int32 | ~int64](v T) string { return strconv.FormatInt(int64(v), 10) }

// splitAddrs splits a comma-separated address list, dropping blanks.
func splitAddrs(list string) []string {
	var out []string
	for _, a := range strings.Split(list, ",") {
		if a = strings.TrimSpace(a); a != "" {
			out = append(out, a)
		}
	}
	return out
}
