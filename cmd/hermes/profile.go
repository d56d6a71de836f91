package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/goccy/go-yaml"
	"github.com/spf13/cobra"
)

// Profiles are named connection settings kept in
// $XDG_CONFIG_HOME/hermes/profiles.yaml (~/.config/hermes/profiles.yaml
// when XDG_CONFIG_HOME is not set), mode 0600. The active one (profile
// use, or --profile / HERMES_PROFILE) supplies the defaults of the
// connection flags; explicit flags and HERMES_* variables win. Secrets
// are kept as paths of files holding them, unless given explicitly.

func init() { clientCommands = append(clientCommands, newProfileCmd) }

type profile struct {
	Addr         string `yaml:"addr,omitempty" json:"addr,omitempty"`
	HTTPAddr     string `yaml:"http_addr,omitempty" json:"http_addr,omitempty"`
	TLS          bool   `yaml:"tls,omitempty" json:"tls,omitempty"`
	TLSCA        string `yaml:"tls_ca,omitempty" json:"tls_ca,omitempty"`
	TLSCert      string `yaml:"tls_cert,omitempty" json:"tls_cert,omitempty"`
	TLSKey       string `yaml:"tls_key,omitempty" json:"tls_key,omitempty"`
	User         string `yaml:"user,omitempty" json:"user,omitempty"`
	PasswordFile string `yaml:"password_file,omitempty" json:"password_file,omitempty"`
	TokenFile    string `yaml:"token_file,omitempty" json:"token_file,omitempty"`
	// Password and Token only when given explicitly (--password,
	// --token): prefer the files.
	Password string `yaml:"password,omitempty" json:"-"`
	Token    string `yaml:"token,omitempty" json:"-"`
}

type profilesFile struct {
	Current  string              `yaml:"current,omitempty"`
	Profiles map[string]*profile `yaml:"profiles"`
}

// profilesPath is where the profiles are kept.
func profilesPath() (string, error) {
	dir := os.Getenv("XDG_CONFIG_HOME")
	if dir == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			return "", fmt.Errorf("no XDG_CONFIG_HOME and no home directory for the profiles: %w", err)
		}
		dir = filepath.Join(home, ".config")
	}
	return filepath.Join(dir, "hermes", "profiles.yaml"), nil
}

// loadProfiles reads the profiles file (empty when there is none).
func loadProfiles() (*profilesFile, string, error) {
	path, err := profilesPath()
	if err != nil {
		return nil, "", err
	}
	pf := &profilesFile{Profiles: map[string]*profile{}}
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return pf, path, nil
	}
	if err != nil {
		return nil, path, err
	}
	if err := yaml.Unmarshal(b, pf); err != nil {
		return nil, path, fmt.Errorf("%s: %w", path, err)
	}
	if pf.Profiles == nil {
		pf.Profiles = map[string]*profile{}
	}
	return pf, path, nil
}

// save writes the file with mode 0600 (its directory 0700), replacing it
// whole.
func (pf *profilesFile) save(path string) error {
	b, err := yaml.Marshal(pf)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".profiles-*.yaml")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if err := tmp.Chmod(0o600); err != nil {
		tmp.Close()
		return err
	}
	if _, err := tmp.Write(b); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

// applyProfile fills the connection flags of cmd that neither the
// command line nor the environment set from the active profile.
func applyProfile(cmd *cobra.Command) error {
	fl := cmd.Flags()
	if fl.Lookup("addr") == nil {
		return nil // not a command that connects
	}
	name := os.Getenv("HERMES_PROFILE")
	if f := fl.Lookup("profile"); f != nil && f.Changed {
		name = f.Value.String()
	}
	pf, path, err := loadProfiles()
	if err != nil {
		if name == "" {
			return nil // a broken file must not break commands not using it
		}
		return err
	}
	if name == "" {
		name = pf.Current
	}
	if name == "" {
		return nil
	}
	p := pf.Profiles[name]
	if p == nil {
		return fmt.Errorf("profile %q not found in %s (hermes profile list)", name, path)
	}
	set := func(flag, env, value string) error {
		f := fl.Lookup(flag)
		if f == nil || f.Changed || value == "" || (env != "" && os.Getenv(env) != "") {
			return nil
		}
		return fl.Set(flag, value)
	}
	addr := p.Addr
	if f := fl.Lookup("protocol"); f != nil && !strings.EqualFold(f.Value.String(), protoGRPC) {
		addr = p.HTTPAddr // the HTTP APIs' address, or their default
	}
	tokenGiven := os.Getenv("HERMES_TOKEN") != "" || fl.Changed("token")
	userGiven := os.Getenv("HERMES_USER") != "" || fl.Changed("user")
	for _, s := range []struct{ flag, env, value string }{
		{"addr", "HERMES_ADDR", addr},
		{"tls", "", strconv.FormatBool(p.TLS)},
		{"tls-ca", "HERMES_TLS_CA", p.TLSCA},
		{"tls-cert", "HERMES_TLS_CERT", p.TLSCert},
		{"tls-key", "HERMES_TLS_KEY", p.TLSKey},
	} {
		if s.flag == "tls" && !p.TLS {
			continue
		}
		if err := set(s.flag, s.env, s.value); err != nil {
			return fmt.Errorf("profile %q: %w", name, err)
		}
	}
	switch {
	case tokenGiven || userGiven:
		// The caller chose the credentials: the profile's are not theirs.
	case p.User != "":
		if err := set("user", "HERMES_USER", p.User); err != nil {
			return err
		}
		pw, err := secret(p.Password, p.PasswordFile)
		if err != nil {
			return fmt.Errorf("profile %q: password file: %w", name, err)
		}
		if err := set("password", "HERMES_PASSWORD", pw); err != nil {
			return err
		}
	case p.Token != "" || p.TokenFile != "":
		tok, err := secret(p.Token, p.TokenFile)
		if err != nil {
			return fmt.Errorf("profile %q: token file: %w", name, err)
		}
		if err := set("token", "HERMES_TOKEN", tok); err != nil {
			return err
		}
	}
	return nil
}

// secret is value, or the first line of file.
func secret(value, file string) (string, error) {
	if value != "" || file == "" {
		return value, nil
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return "", err
	}
	s, _, _ := strings.Cut(string(b), "\n")
	return strings.TrimRight(s, "\r"), nil
}

func newProfileCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "profile",
		Short: "Keep named connection settings (address, TLS, credentials) and choose the active one",
		Long: `Profiles are named connection settings, kept in
$XDG_CONFIG_HOME/hermes/profiles.yaml (~/.config/hermes/profiles.yaml),
readable by their owner only (mode 0600). The active profile — chosen with
"hermes profile use", or for one command with --profile NAME or
HERMES_PROFILE — gives the defaults of --addr, --tls, --tls-ca, --tls-cert,
--tls-key, --user, the password and --token. Flags given on the command
line and HERMES_* environment variables win over it.

Passwords and tokens are best kept in files only the user can read, named
with --password-file and --token-file; --password and --token store the
secret itself in the profiles file.`,
		Example: `  hermes profile create prod --addr node1:50051,node2:50051,node3:50051 --tls-ca ca.pem \
      --user alice --password-file ~/.hermes-prod-password
  hermes profile use prod
  hermes topic list                 # uses prod
  hermes topic list --profile local # uses local for this command only`,
	}
	cmd.AddCommand(newProfileCreateCmd(), newProfileUseCmd(), newProfileListCmd(), newProfileDeleteCmd())
	return cmd
}

func newProfileCreateCmd() *cobra.Command {
	var (
		p         profile
		use, over bool
		out       outputFlag
	)
	cmd := &cobra.Command{
		Use:   "create NAME",
		Short: "Create (or with --overwrite replace) a connection profile",
		Example: `  hermes profile create local --addr 127.0.0.1:50051 --use
  hermes profile create prod --addr node1:50051,node2:50051 --tls-ca ca.pem --user alice --password-file ~/.hermes-password
  hermes profile create ci --addr hermes.internal:50051 --tls --token-file /run/secrets/hermes-token`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			name := args[0]
			if p.Addr == "" && p.HTTPAddr == "" {
				return invalidf("a profile needs --addr (or --http-addr)")
			}
			if p.User != "" && (p.Token != "" || p.TokenFile != "") {
				return invalidf("--user and a token: give one")
			}
			for _, f := range []string{p.PasswordFile, p.TokenFile, p.TLSCA, p.TLSCert, p.TLSKey} {
				if f == "" {
					continue
				}
				if _, err := os.Stat(f); err != nil {
					return fmt.Errorf("profile %s: %w", name, err)
				}
			}
			// Keep file paths valid from any working directory.
			for _, f := range []*string{&p.PasswordFile, &p.TokenFile, &p.TLSCA, &p.TLSCert, &p.TLSKey} {
				if *f != "" {
					abs, err := filepath.Abs(*f)
					if err != nil {
						return err
					}
					*f = abs
				}
			}
			pf, path, err := loadProfiles()
			if err != nil {
				return err
			}
			if pf.Profiles[name] != nil && !over {
				return fmt.Errorf("profile %q exists (--overwrite to replace it)", name)
			}
			pf.Profiles[name] = &p
			if use || len(pf.Profiles) == 1 {
				pf.Current = name
			}
			if err := pf.save(path); err != nil {
				return err
			}
			if p.Password != "" || p.Token != "" {
				fmt.Fprintf(cmd.ErrOrStderr(), "warning: the secret is stored as is in %s (mode 0600); --password-file or --token-file keep it out of it\n", path)
			}
			active := ""
			if pf.Current == name {
				active = " (active)"
			}
			return out.done(cmd, map[string]any{"profile": name, "file": path, "active": pf.Current == name},
				"profile %s saved in %s%s\n", name, path, active)
		},
	}
	out.register(cmd)
	f := cmd.Flags()
	f.StringVar(&p.Addr, "addr", "", "broker gRPC address, or a comma-separated list of a cluster's nodes")
	f.StringVar(&p.HTTPAddr, "http-addr", "", "HTTP address for --protocol rest and graphql (default 127.0.0.1:8080)")
	f.BoolVar(&p.TLS, "tls", false, "connect with TLS, verifying against the system's roots (implied by --tls-ca)")
	f.StringVar(&p.TLSCA, "tls-ca", "", "CA (PEM) that signs the brokers' certificates")
	f.StringVar(&p.TLSCert, "tls-cert", "", "TLS client certificate (PEM)")
	f.StringVar(&p.TLSKey, "tls-key", "", "private key of --tls-cert")
	f.StringVar(&p.User, "user", "", "user to authenticate as")
	f.StringVar(&p.PasswordFile, "password-file", "", "file whose first line is the user's password (kept as a path)")
	f.StringVar(&p.Password, "password", "", "the password itself, stored in the profiles file (prefer --password-file)")
	f.StringVar(&p.TokenFile, "token-file", "", "file whose first line is an API token (kept as a path)")
	f.StringVar(&p.Token, "token", "", "the API token itself, stored in the profiles file (prefer --token-file)")
	f.BoolVar(&use, "use", false, "make it the active profile")
	f.BoolVar(&over, "overwrite", false, "replace a profile of that name")
	return cmd
}

func newProfileUseCmd() *cobra.Command {
	var out outputFlag
	cmd := &cobra.Command{
		Use:     "use NAME",
		Short:   "Make a profile the active one",
		Example: "  hermes profile use prod",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			pf, path, err := loadProfiles()
			if err != nil {
				return err
			}
			if pf.Profiles[args[0]] == nil {
				return fmt.Errorf("profile %q not found (hermes profile list)", args[0])
			}
			pf.Current = args[0]
			if err := pf.save(path); err != nil {
				return err
			}
			return out.done(cmd, map[string]any{"profile": args[0], "active": true}, "active profile: %s\n", args[0])
		},
	}
	out.register(cmd)
	return cmd
}

// profileJSON is one profile in `profile list -o json`; secrets are
// never printed.
type profileJSON struct {
	Name   string `json:"name"`
	Active bool   `json:"active"`
	profile
	HasPassword bool `json:"has_password,omitempty"`
	HasToken    bool `json:"has_token,omitempty"`
}

func newProfileListCmd() *cobra.Command {
	var out outputFlag
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List the profiles (never their secrets)",
		Example: `  hermes profile list
  hermes profile list -o yaml`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if _, err := out.kind(); err != nil {
				return err
			}
			pf, _, err := loadProfiles()
			if err != nil {
				return err
			}
			names := make([]string, 0, len(pf.Profiles))
			for n := range pf.Profiles {
				names = append(names, n)
			}
			sort.Strings(names)
			js := make([]profileJSON, 0, len(names))
			for _, n := range names {
				p := pf.Profiles[n]
				js = append(js, profileJSON{Name: n, Active: n == pf.Current, profile: *p,
					HasPassword: p.Password != "", HasToken: p.Token != ""})
			}
			return out.print(cmd.OutOrStdout(), js, func() error {
				rows := [][]string{{"", "NAME", "ADDR", "TLS", "AUTH"}}
				for _, p := range js {
					cur := ""
					if p.Active {
						cur = "*"
					}
					tlsText := "no"
					switch {
					case p.TLSCA != "":
						tlsText = "ca " + p.TLSCA
					case p.TLS:
						tlsText = "system roots"
					}
					if p.TLSCert != "" {
						tlsText += ", client cert"
					}
					auth := "-"
					switch {
					case p.User != "" && p.PasswordFile != "":
						auth = "user " + p.User + " (password file)"
					case p.User != "":
						auth = "user " + p.User
					case p.TokenFile != "":
						auth = "token file"
					case p.HasToken:
						auth = "token"
					}
					addr := p.Addr
					if addr == "" {
						addr = "http " + p.HTTPAddr
					}
					rows = append(rows, []string{cur, p.Name, addr, tlsText, auth})
				}
				return table(cmd.OutOrStdout(), rows)
			})
		},
	}
	out.register(cmd)
	return cmd
}

func newProfileDeleteCmd() *cobra.Command {
	var out outputFlag
	cmd := &cobra.Command{
		Use:     "delete NAME",
		Short:   "Delete a profile",
		Example: "  hermes profile delete staging",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			pf, path, err := loadProfiles()
			if err != nil {
				return err
			}
			if pf.Profiles[args[0]] == nil {
				return fmt.Errorf("profile %q not found (hermes profile list)", args[0])
			}
			delete(pf.Profiles, args[0])
			if pf.Current == args[0] {
				pf.Current = ""
			}
			if err := pf.save(path); err != nil {
				return err
			}
			return out.done(cmd, map[string]any{"profile": args[0], "deleted": true}, "profile %s deleted\n", args[0])
		},
	}
	out.register(cmd)
	return cmd
}
