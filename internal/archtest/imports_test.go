// Package archtest keeps the import rules of ARCHITECTURE.md: each layer
// imports only the layers below it, adapters never import each other or
// storage, and the public packages import nothing internal.
package archtest

import (
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

const module = "github.com/hermes-mq/hermes/"

// rank orders the layers: a package may import only packages of a lower
// rank (or public ones). cmd → server → api/* → broker → {group, cluster,
// memring} → replication → {partlog, meta, dedup}. Generated protobuf
// packages and small helpers are leaves. Every package has a rank: a new
// one must be placed here (TestImportRules fails otherwise).
func rank(pkg string) (int, bool) {
	switch {
	case strings.HasPrefix(pkg, "pkg/"), strings.HasPrefix(pkg, "proto/"):
		return -1, true
	case strings.HasSuffix(pkg, "pb"), pkg == "internal/jsonscan", pkg == "internal/httpbody":
		return 0, true // generated code, adapters' helpers
	case pkg == "internal/partlog", pkg == "internal/meta", pkg == "internal/dedup", pkg == "internal/tlsconf", pkg == "internal/auth", pkg == "internal/netserve", pkg == "internal/reqmetrics", pkg == "internal/gctune":
		return 0, true
	case pkg == "internal/replication":
		return 1, true
	case pkg == "internal/group", pkg == "internal/cluster", pkg == "internal/memring":
		return 2, true
	case pkg == "internal/broker":
		return 3, true
	case strings.HasPrefix(pkg, "internal/api/"), pkg == "internal/broker/brokertest":
		return 4, true
	case pkg == "internal/server":
		return 5, true
	case strings.HasPrefix(pkg, "cmd/"):
		return 6, true
	case pkg == "internal/bench", pkg == "internal/testcluster", pkg == "internal/chaos":
		return 5, true // tools: they talk to brokers over the network only (the fault campaign reads stopped nodes' files too)
	case pkg == "internal/archtest", pkg == "e2e":
		return 7, true // tests
	}
	return 0, false
}

// adapterMayImport lists what a protocol adapter may import besides the
// public packages: the broker (its interface and types) and its helpers
// (the request metrics among them).
var adapterMayImport = map[string]bool{"internal/broker": true, "internal/jsonscan": true, "internal/httpbody": true, "internal/netserve": true, "internal/reqmetrics": true}

func TestImportRules(t *testing.T) {
	_, file, _, _ := runtime.Caller(0)
	root := filepath.Join(filepath.Dir(file), "..", "..")
	checked := 0
	filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return err
		}
		rel, _ := filepath.Rel(root, filepath.Dir(path))
		from := filepath.ToSlash(rel)
		if strings.HasPrefix(from, ".") { // the tool library beside the project
			return nil
		}
		fromRank, ranked := rank(from)
		if !ranked {
			t.Errorf("package %s has no rank in archtest: place it in the layers", from)
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		checked++
		for _, imp := range f.Imports {
			to := strings.Trim(imp.Path.Value, `"`)
			if !strings.HasPrefix(to, module) {
				continue
			}
			to = strings.TrimPrefix(to, module)
			if msg := violation(from, to, fromRank, ranked); msg != "" {
				t.Errorf("%s imports %s: %s", path[len(root)+1:], to, msg)
			}
		}
		return nil
	})
	if checked < 20 {
		t.Fatalf("checked only %d files; is the root right?", checked)
	}
}

func violation(from, to string, fromRank int, ranked bool) string {
	toRank, toRanked := rank(to)
	switch {
	case (strings.HasPrefix(from, "pkg/") || strings.HasPrefix(from, "proto/")) && strings.HasPrefix(to, "internal/"):
		return "public packages import nothing internal"
	case strings.HasPrefix(from, "internal/api/") && strings.HasPrefix(to, "internal/api/") && from != to:
		return "adapters never import each other"
	case strings.HasPrefix(from, "internal/api/") && strings.HasPrefix(to, "internal/") && !adapterMayImport[to]:
		return "adapters import only the broker's interface and their helpers"
	case to == "internal/partlog" && from != "internal/replication":
		return "only replication opens, writes and truncates partition logs"
	case from == "internal/broker" && (strings.HasPrefix(to, "proto/") || strings.HasPrefix(to, "internal/api/")):
		return "the broker imports no public API and no adapter"
	case (from == "internal/bench" || from == "internal/testcluster" || from == "internal/chaos") && strings.HasPrefix(to, "internal/") && to != "internal/tlsconf":
		return "tools talk to brokers over the network only"
	case ranked && toRanked && toRank >= fromRank && toRank >= 0 && from != to:
		return "imports must point down the layers"
	}
	return ""
}

// The rules themselves, so that TestImportRules can fail.
func TestViolationRules(t *testing.T) {
	cases := []struct {
		from, to string
		bad      bool
	}{
		{"pkg/client", "internal/partlog", true},
		{"pkg/client", "pkg/record", false},
		{"internal/api/grpc", "internal/api/rest", true},
		{"internal/api/grpc", "internal/partlog", true},
		{"internal/api/grpc", "internal/broker", false},
		{"internal/partlog", "internal/broker", true},
		{"internal/broker", "internal/server", true},
		{"internal/broker", "internal/group", false},
		{"internal/server", "internal/api/grpc", false},
		{"internal/api/rest", "internal/group", true},
		{"internal/api/grpc", "internal/broker/nodepb", true},
		{"internal/api/rest", "internal/jsonscan", false},
		{"internal/api/grpc", "proto/hermes/v1", false},
		{"internal/broker", "proto/hermes/v1", true},
		{"internal/broker", "internal/broker/nodepb", false},
		{"internal/bench", "internal/broker", true},
		{"internal/bench", "pkg/client", false},
		{"internal/chaos", "internal/partlog", true},
		{"internal/chaos", "pkg/record", false},
		{"internal/broker", "internal/partlog", true},
		{"internal/cluster", "internal/partlog", true},
		{"internal/replication", "internal/partlog", false},
	}
	for _, c := range cases {
		r, ok := rank(c.from)
		if got := violation(c.from, c.to, r, ok) != ""; got != c.bad {
			t.Errorf("%s → %s: violation %v, want %v", c.from, c.to, got, c.bad)
		}
	}
}
