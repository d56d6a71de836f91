package main

import (
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/hermes-mq/hermes/internal/tlsconf"
)

func init() { clientCommands = append(clientCommands, newDevCertsCmd) }

func newDevCertsCmd() *cobra.Command {
	var (
		o   tlsconf.DevOptions
		out outputFlag
	)
	cmd := &cobra.Command{
		Use:   "dev-certs",
		Short: "Write a CA and node and client certificates for local use and tests",
		Long: `dev-certs writes, into --dir, a CA (ca.crt, ca.key) and certificates
signed by it: node-<id>.crt/.key for nodes 1 to --nodes (each names its node,
hermes://node/<id>, and is valid for --hosts as a server and as a client), and
client-<name>.crt/.key for every --clients name (the name is the principal).
A CA already in --dir signs the new certificates, so clients can be added
later. Keys are ECDSA P-256, readable by their owner only. For production,
issue certificates from your own PKI with the same fields.`,
		Example: `  hermes dev-certs --dir certs --nodes 3 --clients admin,alice
  hermes serve --tls-cert certs/node-1.crt --tls-key certs/node-1.key --tls-client-ca certs/ca.crt \
    --node-tls-cert certs/node-1.crt --node-tls-key certs/node-1.key --node-tls-ca certs/ca.crt
  hermes topic list --tls-ca certs/ca.crt`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if o.Nodes < 0 {
				return fmt.Errorf("--nodes must not be negative")
			}
			if err := tlsconf.WriteDev(o); err != nil {
				return err
			}
			files := devCertsJSON{CA: tlsconf.CAFile(o.Dir), Nodes: map[string]certJSON{}, Clients: map[string]certJSON{}}
			certs := []string{files.CA}
			for id := 1; id <= o.Nodes; id++ {
				f := tlsconf.NodeFiles(o.Dir, uint64(id))
				files.Nodes[fmt.Sprint(id)] = certJSON{f.Cert, f.Key}
				certs = append(certs, f.Cert)
			}
			for _, c := range o.Clients {
				f := tlsconf.ClientFiles(o.Dir, c)
				files.Clients[c] = certJSON{f.Cert, f.Key}
				certs = append(certs, f.Cert)
			}
			return out.done(cmd, files, "wrote %s (and their keys)\n", strings.Join(certs, ", "))
		},
	}
	out.register(cmd)
	f := cmd.Flags()
	f.StringVar(&o.Dir, "dir", "certs", "directory to write into")
	f.IntVar(&o.Nodes, "nodes", 1, "node certificates to write (node-1 ... node-N)")
	f.StringSliceVar(&o.Clients, "clients", nil, "client certificates to write, one per principal name")
	f.StringSliceVar(&o.Hosts, "hosts", []string{"localhost", "127.0.0.1"}, "names and addresses the node certificates are valid for")
	f.DurationVar(&o.Validity, "validity", 365*24*time.Hour, "how long the new certificates are valid")
	return cmd
}

// devCertsJSON is the -o json and -o yaml form of dev-certs: the files
// written, by node id and client name.
type devCertsJSON struct {
	CA      string              `json:"ca"`
	Nodes   map[string]certJSON `json:"nodes"`
	Clients map[string]certJSON `json:"clients"`
}

type certJSON struct {
	Cert string `json:"cert"`
	Key  string `json:"key"`
}
