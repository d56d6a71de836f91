// Command hermes is the Hermes broker and its command-line tools in one
// binary: `hermes serve` runs a broker; the other subcommands talk to one.
package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

func main() {
	root := newRootCmd()
	if err := root.Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "hermes:", err)
		os.Exit(1)
	}
}

func newRootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:           "hermes",
		Short:         "Hermes: a distributed, persistent message broker",
		Version:       version,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(newServeCmd())
	for _, add := range clientCommands {
		root.AddCommand(add())
	}
	return root
}

// clientCommands are the subcommands that talk to a running broker; each
// file that defines one appends its constructor in an init function.
var clientCommands []func() *cobra.Command
