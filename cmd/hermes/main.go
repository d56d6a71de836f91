// Command hermes is the Hermes broker and its command-line tools in one
// binary: `hermes serve` runs a broker; the other subcommands talk to one.
package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"
)

func main() {
	root := newRootCmd()
	if err := root.Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "hermes:", err)
		os.Exit(1)
	}
}

func newRootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:   "hermes",
		Short: "Hermes: a distributed, persistent message broker",
		Long: `Hermes: a distributed, persistent message broker. "hermes serve" runs a
broker; the other commands talk to one, at --addr (default 127.0.0.1:50051,
or HERMES_ADDR, or the active profile's address: see "hermes profile").

Every command takes -o table|json|yaml (table, for people, is the
default; consume's is text) except those that run a server (serve, bench
relay) and completion, which prints a shell script.`,
		Example: `  hermes serve --data-dir ./data
  hermes topic create orders --partitions 3
  echo hello | hermes publish orders
  hermes consume orders --from-beginning
  hermes completion bash > /etc/bash_completion.d/hermes`,
		Version:       version,
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			warnDeprecated(cmd)
			return applyProfile(cmd)
		},
	}
	root.SetVersionTemplate(currentVersion().text())
	root.CompletionOptions.HiddenDefaultCmd = false
	root.AddCommand(newServeCmd())
	for _, add := range clientCommands {
		root.AddCommand(add())
	}
	addFallbackExamples(root)
	// cobra adds the completion command when it executes (it writes to
	// the output set by then), after this: its examples are added when
	// help is shown.
	help := root.HelpFunc()
	root.SetHelpFunc(func(c *cobra.Command, args []string) {
		addFallbackExamples(c.Root())
		help(c, args)
	})
	return root
}

// fallbackExamples are the examples of commands whose files do not give
// one; a command's own Example wins.
var fallbackExamples = map[string]string{
	"hermes bench": `  hermes bench --target hermes --scenario live --duration 30s
  hermes bench --target hermes --scenario crash --workers 4 --json report.json`,
	"hermes bench matrix": `  hermes bench matrix --targets hermes --md results.md`,
	"hermes completion": `  hermes completion bash > /etc/bash_completion.d/hermes
  hermes completion zsh > "${fpath[1]}/_hermes"`,
	"hermes completion bash": `  hermes completion bash > /etc/bash_completion.d/hermes
  source <(hermes completion bash)   # this shell only`,
	"hermes completion zsh":        `  hermes completion zsh > "${fpath[1]}/_hermes"`,
	"hermes completion fish":       `  hermes completion fish > ~/.config/fish/completions/hermes.fish`,
	"hermes completion powershell": `  hermes completion powershell | Out-String | Invoke-Expression`,
}

func addFallbackExamples(c *cobra.Command) {
	if ex, ok := fallbackExamples[c.CommandPath()]; ok && c.Example == "" {
		c.Example = ex
	}
	for _, s := range c.Commands() {
		addFallbackExamples(s)
	}
}

// clientCommands are the subcommands that talk to a running broker; each
// file that defines one appends its constructor in an init function.
var clientCommands []func() *cobra.Command
