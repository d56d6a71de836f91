package main

import (
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/spf13/cobra"
)

// Set at build time by the Makefile's build target:
//
//	-ldflags "-X main.version=$(git describe) -X main.commit=$(git rev-parse --short HEAD) -X main.buildDate=..."
//
// A build without them says "dev" and "unknown".
var (
	version   = "dev"
	commit    = "unknown"
	buildDate = "unknown"
)

func init() { clientCommands = append(clientCommands, newVersionCmd) }

// versionInfo is `hermes version -o json`.
type versionInfo struct {
	Version   string `json:"version"`
	Commit    string `json:"commit"`
	BuildDate string `json:"build_date"`
	GoVersion string `json:"go_version"`
	Platform  string `json:"platform"`
}

func currentVersion() versionInfo {
	v := versionInfo{Version: version, Commit: commit, BuildDate: buildDate, GoVersion: runtime.Version(),
		Platform: runtime.GOOS + "/" + runtime.GOARCH}
	if v.Commit == "unknown" {
		// go build in a git checkout records the revision itself.
		if bi, ok := debug.ReadBuildInfo(); ok {
			var rev, modified string
			for _, s := range bi.Settings {
				switch s.Key {
				case "vcs.revision":
					rev = s.Value
				case "vcs.modified":
					modified = s.Value
				}
			}
			if len(rev) > 12 {
				rev = rev[:12]
			}
			if rev != "" {
				if modified == "true" {
					rev += "-dirty"
				}
				v.Commit = rev
			}
		}
	}
	return v
}

func (v versionInfo) text() string {
	return fmt.Sprintf("hermes %s\n  commit:     %s\n  built:      %s\n  go version: %s\n  platform:   %s\n",
		v.Version, v.Commit, v.BuildDate, v.GoVersion, v.Platform)
}

func newVersionCmd() *cobra.Command {
	var out outputFlag
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print the version, commit, build date and Go version of this hermes binary",
		Example: `  hermes version
  hermes version -o json
  hermes --version`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			v := currentVersion()
			return out.print(cmd.OutOrStdout(), v, func() error {
				_, err := fmt.Fprint(cmd.OutOrStdout(), v.text())
				return err
			})
		},
	}
	out.register(cmd)
	return cmd
}
