package main

import (
	"encoding/json"
	"fmt"
	"io"

	"github.com/goccy/go-yaml"
	"github.com/spf13/cobra"
)

// outputFlag is -o/--output, the one output format flag of every
// command that prints data: table (the default, for people), json or
// yaml (for scripts; both have the same fields). The older --json
// spelling still works, hidden and deprecated.
type outputFlag struct {
	format string
	asJSON bool // the deprecated --json
}

// register adds -o/--output and the deprecated --json to cmd, and checks
// the format before cmd runs: a command that changes something refuses a
// bad -o before it changes anything.
func (o *outputFlag) register(cmd *cobra.Command) {
	o.registerWith(cmd, "table", "output format: table, json or yaml")
	if run := cmd.RunE; run != nil {
		cmd.RunE = func(cmd *cobra.Command, args []string) error {
			if _, err := o.kind(); err != nil {
				return err
			}
			return run(cmd, args)
		}
	}
}

// done reports what a command did: the line format (with args) for
// people, v for -o json and -o yaml.
func (o *outputFlag) done(cmd *cobra.Command, v any, format string, args ...any) error {
	w := cmd.OutOrStdout()
	return o.print(w, v, func() error {
		_, err := fmt.Fprintf(w, format, args...)
		return err
	})
}

func (o *outputFlag) registerWith(cmd *cobra.Command, def, usage string) {
	f := cmd.Flags()
	f.StringVarP(&o.format, "output", "o", def, usage)
	f.BoolVar(&o.asJSON, "json", false, "print JSON")
	_ = f.MarkHidden("json")
}

// deprecatedFlags are old spellings that still work, hidden; using one
// prints a note on stderr (never on stdout, which scripts parse).
var deprecatedFlags = map[string]string{
	"json":   "--json is deprecated: use -o json",
	"format": "--format is deprecated: use -o text|json|yaml",
}

func warnDeprecated(cmd *cobra.Command) {
	for name, note := range deprecatedFlags {
		if f := cmd.Flags().Lookup(name); f != nil && f.Hidden && f.Changed {
			fmt.Fprintln(cmd.ErrOrStderr(), "hermes: "+note)
		}
	}
}

// kind is the format asked for, or an error naming the ones allowed.
func (o *outputFlag) kind(allowed ...string) (string, error) {
	if o.asJSON {
		return "json", nil
	}
	if len(allowed) == 0 {
		allowed = []string{"table", "json", "yaml"}
	}
	for _, a := range allowed {
		if o.format == a {
			return a, nil
		}
	}
	return "", fmt.Errorf("-o %q: use %s", o.format, orList(allowed))
}

// print writes v as JSON or YAML, or calls tableFn for the table form.
func (o *outputFlag) print(w io.Writer, v any, tableFn func() error) error {
	k, err := o.kind()
	if err != nil {
		return err
	}
	switch k {
	case "json":
		return printJSON(w, v)
	case "yaml":
		return printYAML(w, v)
	}
	return tableFn()
}

// printItem writes one item of a stream: a line of compact JSON (json) or
// a YAML document (yaml), as consume prints records and publish their
// places.
func printItem(w io.Writer, kind string, v any) error {
	if kind == "yaml" {
		if _, err := io.WriteString(w, "---\n"); err != nil {
			return err
		}
		return printYAML(w, v)
	}
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "%s\n", b)
	return err
}

// printJSON writes v as indented JSON.
func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// printYAML writes v as YAML with the field names of its JSON form.
func printYAML(w io.Writer, v any) error {
	j, err := json.Marshal(v)
	if err != nil {
		return err
	}
	y, err := yaml.JSONToYAML(j)
	if err != nil {
		return err
	}
	_, err = w.Write(y)
	return err
}

func orList(s []string) string {
	switch len(s) {
	case 0:
		return ""
	case 1:
		return s[0]
	}
	out := ""
	for i, x := range s[:len(s)-1] {
		if i > 0 {
			out += ", "
		}
		out += x
	}
	return out + " or " + s[len(s)-1]
}
