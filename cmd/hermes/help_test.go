package main

import (
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

// TestEveryCommandHasExample: every command's help shows how to run it.
func TestEveryCommandHasExample(t *testing.T) {
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		if c.Name() == "help" || c.Hidden {
			return
		}
		if c.Example == "" {
			t.Errorf("%s has no Example", c.CommandPath())
		}
		for _, s := range c.Commands() {
			walk(s)
		}
	}
	root := newRootCmd()
	root.InitDefaultCompletionCmd() // as Execute does
	addFallbackExamples(root)
	walk(root)
	// What a user sees.
	for _, args := range [][]string{{"completion", "--help"}, {"completion", "bash", "--help"}, {"topic", "delete", "--help"}} {
		if out := mustHermes(t, "", args...); !strings.Contains(out, "Examples:") {
			t.Errorf("hermes %s shows no examples:\n%s", strings.Join(args, " "), out)
		}
	}
}

// noOutputFlag lists the commands without -o: servers, and completion,
// whose output is a shell script.
var noOutputFlag = map[string]bool{"hermes serve": true, "hermes bench relay": true}

// TestEveryCommandTakesOutput: -o table|json|yaml on every command that
// runs, as the root help says.
func TestEveryCommandTakesOutput(t *testing.T) {
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		path := c.CommandPath()
		if c.Name() == "help" || c.Hidden || strings.HasPrefix(path, "hermes completion") {
			return
		}
		if c.Runnable() && !noOutputFlag[path] {
			f := c.Flags().Lookup("output")
			if f == nil || f.Shorthand != "o" {
				t.Errorf("%s has no -o", path)
			}
		}
		for _, s := range c.Commands() {
			walk(s)
		}
	}
	walk(newRootCmd())
}
