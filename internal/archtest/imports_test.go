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
// memring} → replication → {partlog, meta}.
func rank(pkg string) (int, bool) {
	switch {
	case strings.HasPrefix(pkg, "pkg/"), strings.HasPrefix(pkg, "proto/"):
		return -1, true
	case pkg == "internal/partlog", pkg == "internal/meta":
		return 0, true
	case pkg == "internal/replication":
		return 1, true
	case pkg == "internal/group", pkg == "internal/cluster", pkg == "internal/memring":
		return 2, true
	case pkg == "internal/broker":
		return 3, true
	case strings.HasPrefix(pkg, "internal/api/"):
		return 4, true
	case pkg == "internal/server":
		return 5, true
	case strings.HasPrefix(pkg, "cmd/"):
		return 6, true
	}
	return 0, false
}

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
		fromRank, ranked := rank(from)
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
	case strings.HasPrefix(from, "internal/api/") && (to == "internal/partlog" || to == "internal/meta" || to == "internal/replication"):
		return "adapters know nothing about storage or Raft"
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
	}
	for _, c := range cases {
		r, ok := rank(c.from)
		if got := violation(c.from, c.to, r, ok) != ""; got != c.bad {
			t.Errorf("%s → %s: violation %v, want %v", c.from, c.to, got, c.bad)
		}
	}
}
