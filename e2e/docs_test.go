package e2e

// The docs test: every shell block of README.md, docs/*.md and
// clients/*/README.md runs as written on a copy of the checkout, or is
// annotated with the reason it cannot run here (`make docs-test`).
//
// A block is a fence tagged sh, bash, shell or console. An annotation is an
// HTML comment on the last non-blank line before the fence:
//
//	<!-- docs-test: skip reason="serves in the foreground until stopped" -->
//	<!-- docs-test: continues -->
//	<!-- docs-test: setup="hermes topic create orders" -->
//	<!-- docs-test: background="curl -N" reason="Server-Sent Events stream until stopped" -->
//	<!-- docs-test: timeout="4m" -->
//
//   - skip: the block is not run; reason is required.
//   - continues: the block runs with the shell variables and working
//     directory the previous block of the file left, as in a reader's
//     terminal (every other block starts a fresh shell).
//   - setup="CMDS": commands run first, in the block's shell, to give it
//     the state its text assumes (a topic, a group); they are in the
//     Markdown source for anyone to read, and must succeed.
//   - background="TEXT": the lines containing TEXT run in the background
//     (commands that run until stopped) and are stopped when the block
//     ends; reason is required.
//   - timeout: the block's limit (default 2m).
//
// Anything else in an annotation, an annotation that does not precede a
// shell block, or a skip or background without a reason fails the test.
//
// How a block runs: bash -e -o pipefail, in a copy of the checkout (the
// tracked and untracked, not ignored, files: a fresh clone with the
// working tree's edits) where `make build` has been run, with the copy's
// bin/ first on PATH, a fresh HOME, and HERMES_ADDR naming the file's
// broker. Each file gets its own broker (bin/hermes serve, an empty data
// directory, free loopback ports), started before its first block and
// stopped after its last; the files the blocks leave in the copy are
// removed then too. What a block starts in the background (`... &`) runs
// until the end of its file, and is then stopped with the block's process
// group. curl fails on HTTP errors (--fail-with-body is added unless the
// command already says --fail), as the reader would see an error.
//
// Ports: the docs give the defaults (127.0.0.1:50051 gRPC, :8080 HTTP,
// :9092 Kafka, :7070 hermes-wire, :50052 nodes) and fixed ports for the
// examples that start servers of their own. Before a block runs, every
// 127.0.0.1:PORT and localhost:PORT in it is rewritten, the same way in
// every block of the file: a default to the port of the file's broker,
// unless a `hermes serve` line of the file listens on it; that, and any
// other port, to a free
// port. The test's broker and servers therefore never
// depend on those ports being free, and a reader's broker on them is left
// alone.
//
// TestDocsAnnotations (always run) checks the annotations and the text:
// no session or tracker references, no paths outside the repository, no
// package registry host names. TestDocsCommands runs the blocks; it needs
// HERMES_DOCS_TEST=1 (make docs-test) and is skipped otherwise.

import (
	"bufio"
	"bytes"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hermes-mq/hermes/internal/testcluster"
)

var docsShellLangs = map[string]bool{"sh": true, "bash": true, "shell": true, "console": true}

type docBlock struct {
	file, lang, text string
	line             int // of the opening fence
	skip             bool
	reason           string
	continues        bool
	background       string
	setup            string
	timeout          time.Duration
}

var (
	docsAnnotRE = regexp.MustCompile(`^<!--\s*docs-test:(.*?)-->\s*$`)
	docsTokenRE = regexp.MustCompile(`^\s*([a-z-]+)(?:="([^"]*)")?`)
	// the first line of an untagged block that is a command to run
	docsCommandRE = regexp.MustCompile(`^\s*(\$ |(bin/)?hermes |make |curl |go (run|build|test) |cd |docker |kubectl |cargo |npm |python3? )`)
)

// docsRoot is the repository root: e2e/..
func docsRoot(t *testing.T) string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..")
}

// docsFiles lists the checked Markdown files, relative to root.
func docsFiles(t *testing.T, root string) []string {
	files := []string{"README.md"}
	for _, pat := range []string{"docs/*.md", "clients/*/README.md"} {
		m, err := filepath.Glob(filepath.Join(root, pat))
		if err != nil {
			t.Fatal(err)
		}
		sort.Strings(m)
		for _, f := range m {
			rel, _ := filepath.Rel(root, f)
			files = append(files, filepath.ToSlash(rel))
		}
	}
	return files
}

// parseDocBlocks returns the shell blocks of one file, with their
// annotations, and the problems found (malformed or misplaced annotations,
// unclosed fences).
func parseDocBlocks(file, content string) ([]docBlock, []string) {
	var blocks []docBlock
	var problems []string
	lines := strings.Split(content, "\n")
	inFence := false
	fence := ""
	var cur *docBlock
	var body []string
	pendingLine := 0 // line of an annotation waiting for its block
	var pending *docBlock
	lastNonBlank := ""
	for i, ln := range lines {
		n := i + 1
		trimmed := strings.TrimSpace(ln)
		if inFence {
			if strings.HasPrefix(trimmed, fence) && strings.Trim(trimmed, "`~") == "" {
				inFence = false
				if cur != nil {
					cur.text = strings.Join(body, "\n") + "\n"
					blocks = append(blocks, *cur)
					cur = nil
				}
				lastNonBlank = trimmed
				continue
			}
			if cur != nil {
				body = append(body, ln)
			}
			continue
		}
		if strings.HasPrefix(trimmed, "```") || strings.HasPrefix(trimmed, "~~~") {
			fence = trimmed[:3]
			inFence = true
			lang := strings.Fields(strings.TrimLeft(trimmed, "`~") + " ")
			l := ""
			if len(lang) > 0 {
				l = lang[0]
			}
			if docsShellLangs[l] {
				cur = &docBlock{file: file, lang: l, line: n, timeout: 2 * time.Minute}
				if pending != nil && docsAnnotRE.MatchString(lastNonBlank) {
					pending.file, pending.lang, pending.line = file, l, n
					cur = pending
				}
				body = nil
			} else if pending != nil {
				problems = append(problems, fmt.Sprintf("%s:%d: docs-test annotation before a %q block, not a shell block", file, pendingLine, l))
			}
			if l == "" && i+1 < len(lines) && docsCommandRE.MatchString(lines[i+1]) {
				problems = append(problems, fmt.Sprintf("%s:%d: an untagged block that starts with a command: tag it sh (it then runs, or says why not)", file, n))
			}
			pending = nil
			continue
		}
		if m := docsAnnotRE.FindStringSubmatch(trimmed); m != nil {
			if pending != nil {
				problems = append(problems, fmt.Sprintf("%s:%d: docs-test annotation not followed by a shell block", file, pendingLine))
			}
			b, errs := parseDocAnnotation(m[1])
			for _, e := range errs {
				problems = append(problems, fmt.Sprintf("%s:%d: %s", file, n, e))
			}
			pending, pendingLine = &b, n
		} else if strings.HasPrefix(trimmed, "<!--") && strings.Contains(trimmed, "docs-test") {
			problems = append(problems, fmt.Sprintf("%s:%d: malformed docs-test annotation (one line: <!-- docs-test: ... -->)", file, n))
		} else if trimmed != "" && pending != nil {
			problems = append(problems, fmt.Sprintf("%s:%d: docs-test annotation not followed by a shell block", file, pendingLine))
			pending = nil
		}
		if trimmed != "" {
			lastNonBlank = trimmed
		}
	}
	if inFence {
		problems = append(problems, fmt.Sprintf("%s: a fence is not closed", file))
	}
	if pending != nil {
		problems = append(problems, fmt.Sprintf("%s:%d: docs-test annotation not followed by a shell block", file, pendingLine))
	}
	return blocks, problems
}

func parseDocAnnotation(s string) (docBlock, []string) {
	b := docBlock{timeout: 2 * time.Minute}
	var errs []string
	seen := map[string]bool{}
	rest := s
	for strings.TrimSpace(rest) != "" {
		m := docsTokenRE.FindStringSubmatchIndex(rest)
		if m == nil {
			errs = append(errs, fmt.Sprintf("cannot parse docs-test annotation at %q", strings.TrimSpace(rest)))
			break
		}
		key := rest[m[2]:m[3]]
		hasVal := m[4] >= 0
		val := ""
		if hasVal {
			val = rest[m[4]:m[5]]
		}
		rest = rest[m[1]:]
		if seen[key] {
			errs = append(errs, fmt.Sprintf("docs-test: %s given twice", key))
		}
		seen[key] = true
		switch {
		case key == "skip" && !hasVal:
			b.skip = true
		case key == "continues" && !hasVal:
			b.continues = true
		case key == "reason" && hasVal:
			b.reason = strings.TrimSpace(val)
		case key == "background" && hasVal && val != "":
			b.background = val
		case key == "setup" && hasVal && val != "":
			b.setup = val
		case key == "timeout" && hasVal:
			d, err := time.ParseDuration(val)
			if err != nil || d <= 0 || d > 10*time.Minute {
				errs = append(errs, fmt.Sprintf("docs-test: timeout %q: a duration up to 10m", val))
			}
			b.timeout = d
		default:
			errs = append(errs, fmt.Sprintf("docs-test: unknown or malformed %q (skip reason=\"...\", continues, setup=\"CMDS\", background=\"TEXT\" reason=\"...\", timeout=\"DUR\")", key))
		}
	}
	if len(errs) == 0 && !b.skip && !b.continues && b.background == "" && b.setup == "" && !seen["timeout"] {
		errs = append(errs, "docs-test: an annotation must say skip, continues, setup, background or timeout")
	}
	if (b.skip || b.background != "") && b.reason == "" {
		errs = append(errs, "docs-test: skip and background need a reason=\"...\"")
	}
	if b.reason != "" && !b.skip && b.background == "" {
		errs = append(errs, "docs-test: reason is for skip and background")
	}
	if b.skip && (b.continues || b.background != "" || b.setup != "" || seen["timeout"]) {
		errs = append(errs, "docs-test: skip takes only a reason")
	}
	return b, errs
}

// Text the user-facing docs must not contain: references to work sessions
// and trackers, paths of a machine outside the repository, package registry
// hosts (the clients find them on their own).
var docsForbidden = []struct{ re, why string }{
	{`(?i)\bdocument\s+0\d\d\b`, "a work document reference"},
	{`(?i)\b(issue|ticket|bug)\s*#?\s*\d+`, "a tracker reference"},
	{`(?i)\bsession\s+#?\d+\b`, "a work session reference"},
	{`(?i)\b(this|previous|earlier|last|next|our|agent|coding|work)\s+session\b`, "a work session reference"},
	{`(?i)\b(the brief|claude|chatgpt|llm)\b`, "a reference to how the text was written"},
	{`(^|[\s("'=])/(work|root|home|Users)/`, "a path outside the repository"},
	{`\.library/`, "a path outside the repository"},
	{`\.\./shared\b|(?i)\bseeds/`, "a path outside the repository"},
	{`(?i)\b(proxy\.golang\.org|sum\.golang\.org|pypi\.org|files\.pythonhosted\.org|registry\.npmjs\.org|registry\.yarnpkg\.com|(static\.|index\.)?crates\.io|repo1?\.maven(\.apache)?\.org|registry-1\.docker\.io)\b`, "a package registry host"},
}

func TestDocsAnnotations(t *testing.T) {
	root := docsRoot(t)
	total, skipped := 0, 0
	for _, f := range docsFiles(t, root) {
		data, err := os.ReadFile(filepath.Join(root, f))
		if err != nil {
			t.Fatal(err)
		}
		blocks, problems := parseDocBlocks(f, string(data))
		for _, p := range problems {
			t.Error(p)
		}
		for _, b := range blocks {
			total++
			if b.skip {
				skipped++
			}
		}
		for _, fb := range docsForbidden {
			re := regexp.MustCompile(fb.re)
			for i, ln := range strings.Split(string(data), "\n") {
				if m := re.FindString(ln); m != "" {
					t.Errorf("%s:%d: %s: %q", f, i+1, fb.why, strings.TrimSpace(m))
				}
			}
		}
	}
	if total < 20 {
		t.Fatalf("found only %d shell blocks; is the root right?", total)
	}
	t.Logf("%d shell blocks, %d annotated skip", total, skipped)
}

// The test's own checks of parseDocBlocks, so that it can fail.
func TestDocsAnnotationParser(t *testing.T) {
	md := "x\n<!-- docs-test: skip -->\n```sh\nfalse\n```\n" + // skip without reason
		"<!-- docs-test: skip reason=\"r\" -->\n\n```sh\nfalse\n```\n" + // fine
		"<!-- docs-test: frobnicate -->\n```sh\ntrue\n```\n" + // unknown
		"<!-- docs-test: skip reason=\"r\" -->\ntext\n```sh\ntrue\n```\n" + // not attached
		"<!-- docs-test: continues -->\n```go\nx\n```\n" + // not a shell block
		"```bash\necho hi\n```\n" +
		"```\nhermes topic list\n```\n" // a command in an untagged block
	blocks, problems := parseDocBlocks("t.md", md)
	if len(blocks) != 5 {
		t.Fatalf("%d blocks, want 5", len(blocks))
	}
	if !blocks[1].skip || blocks[1].reason != "r" || blocks[3].skip || blocks[4].skip || blocks[4].lang != "bash" {
		t.Errorf("blocks: %+v", blocks)
	}
	if len(problems) != 5 {
		t.Errorf("problems %d, want 5: %q", len(problems), problems)
	}
}

// docsCopy copies the checkout's tracked and untracked, not ignored, files
// into dst.
func docsCopy(t *testing.T, root, dst string) {
	out, err := exec.Command("git", "-C", root, "ls-files", "-z", "--cached", "--others", "--exclude-standard").Output()
	if err != nil {
		t.Fatalf("git ls-files: %v", err)
	}
	for _, rel := range strings.Split(string(out), "\x00") {
		if rel == "" {
			continue
		}
		src := filepath.Join(root, rel)
		fi, err := os.Lstat(src)
		if err != nil {
			continue // deleted in the working tree
		}
		target := filepath.Join(dst, rel)
		if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
			t.Fatal(err)
		}
		switch {
		case fi.Mode()&os.ModeSymlink != 0:
			l, err := os.Readlink(src)
			if err == nil {
				err = os.Symlink(l, target)
			}
			if err != nil {
				t.Fatal(err)
			}
		case fi.Mode().IsRegular():
			data, err := os.ReadFile(src)
			if err == nil {
				err = os.WriteFile(target, data, fi.Mode().Perm())
			}
			if err != nil {
				t.Fatal(err)
			}
		}
	}
}

// docsFreePort is a port of testcluster.FreeAddr: below the ephemeral
// range, so no outgoing connection of the nodes a block starts takes it
// before the block binds it (a port from 127.0.0.1:0 could be, and a
// block waiting for that node's /readyz then waits out its timeout).
func docsFreePort(t *testing.T) string {
	_, port, _ := strings.Cut(testcluster.FreeAddr(t), ":")
	return port
}

var docsAddrRE = regexp.MustCompile(`\b(127\.0\.0\.1|localhost):(\d{2,5})\b`)

// docsBackground rewrites the lines of script containing text to run in
// the background, and stops them at the end of the script.
func docsBackground(script, text string) (string, int) {
	var out []string
	n := 0
	for _, ln := range strings.Split(script, "\n") {
		if strings.Contains(ln, text) {
			ln = strings.TrimRight(docsStripComment(ln), " \t") + " & __docs_bg+=($!)"
			n++
		}
		out = append(out, ln)
	}
	return strings.Join(out, "\n") + "\nsleep 1; kill \"${__docs_bg[@]}\" 2>/dev/null || true\n", n
}

// docsStripComment removes a trailing shell comment (a # after a blank,
// outside quotes).
func docsStripComment(ln string) string {
	var q byte
	for i := 0; i < len(ln); i++ {
		c := ln[i]
		switch {
		case q != 0:
			if c == q {
				q = 0
			}
		case c == '\'' || c == '"':
			q = c
		case c == '#' && (i == 0 || ln[i-1] == ' ' || ln[i-1] == '\t'):
			return ln[:i]
		}
	}
	return ln
}

type docsEnv struct {
	root, src, tmp string
	env            []string // without HOME and HERMES_ADDR
	// failed names each failed block with its error and last lines, said
	// again at the end: a CI log that keeps only the tail still shows why.
	failed []string
}

func TestDocsCommands(t *testing.T) {
	if os.Getenv("HERMES_DOCS_TEST") == "" {
		t.Skip("runs every shell block of the docs: HERMES_DOCS_TEST=1 (make docs-test)")
	}
	root := docsRoot(t)
	tmp := t.TempDir()
	d := &docsEnv{root: root, src: filepath.Join(tmp, "hermes"), tmp: tmp}
	docsCopy(t, root, d.src)

	// The Go caches stay the user's: a fresh HOME must not mean a cold build.
	goenv, err := exec.Command("go", "env", "GOCACHE", "GOMODCACHE", "GOPATH").Output()
	if err != nil {
		t.Fatalf("go env: %v", err)
	}
	gv := strings.Split(strings.TrimSpace(string(goenv)), "\n")
	realCurl, err := exec.LookPath("curl")
	if err != nil {
		t.Fatal("curl is needed")
	}
	shim := filepath.Join(tmp, "shim")
	os.MkdirAll(shim, 0o755)
	os.WriteFile(filepath.Join(shim, "curl"), []byte(`#!/bin/sh
# the docs test: an HTTP error fails the command
for a in "$@"; do case $a in --fail|--fail-with-body|-[!-]*f*) exec `+realCurl+` "$@";; esac; done
exec `+realCurl+` --fail-with-body "$@"
`), 0o755)
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		switch {
		case k == "PATH", k == "HOME", k == "PWD", k == "OLDPWD", k == "GOFLAGS", k == "XDG_CONFIG_HOME",
			k == "MAKEFLAGS", k == "MFLAGS", k == "MAKELEVEL", strings.HasPrefix(k, "HERMES_"):
			continue
		}
		d.env = append(d.env, kv)
	}
	d.env = append(d.env, "PATH="+filepath.Join(d.src, "bin")+":"+shim+":"+os.Getenv("PATH"),
		"GOCACHE="+gv[0], "GOMODCACHE="+gv[1], "GOPATH="+gv[2])

	start := time.Now()
	if out, err := d.command(t, "make build", filepath.Join(tmp, "home-build")).CombinedOutput(); err != nil {
		t.Fatalf("make build in the copy: %v\n%s", err, out)
	}
	t.Logf("copied the checkout and ran make build in %v", time.Since(start).Round(time.Second))
	baseline := map[string]bool{}
	ents, _ := os.ReadDir(d.src)
	for _, e := range ents {
		baseline[e.Name()] = true
	}

	ran, skipped := 0, map[string]int{}
	for fi, f := range docsFiles(t, root) {
		data, err := os.ReadFile(filepath.Join(d.src, f))
		if err != nil {
			t.Fatal(err)
		}
		blocks, problems := parseDocBlocks(f, string(data))
		if len(problems) > 0 {
			t.Errorf("%s: %s (see TestDocsAnnotations)", f, strings.Join(problems, "; "))
			continue
		}
		if len(blocks) == 0 {
			continue
		}
		fstart := time.Now()
		r, s := d.runFile(t, fi, f, blocks)
		ran += r
		for k, v := range s {
			skipped[k] += v
		}
		// Leave the copy as the build left it for the next file.
		ents, _ := os.ReadDir(d.src)
		for _, e := range ents {
			if !baseline[e.Name()] {
				os.RemoveAll(filepath.Join(d.src, e.Name()))
			}
		}
		n := 0
		for _, v := range s {
			n += v
		}
		t.Logf("docs-test: %-28s %2d blocks run, %2d skipped (%v)", f, r, n, time.Since(fstart).Round(100*time.Millisecond))
	}
	var reasons []string
	total := 0
	for k, v := range skipped {
		reasons = append(reasons, fmt.Sprintf("  %d × %s", v, k))
		total += v
	}
	sort.Strings(reasons)
	t.Logf("docs-test: %d blocks run, %d skipped:\n%s", ran, total, strings.Join(reasons, "\n"))
	if len(d.failed) > 0 {
		t.Errorf("docs-test: %d blocks failed (each in full above):\n%s", len(d.failed), strings.Join(d.failed, "\n"))
	}
}

// command is a bash -c of script in the copy, in a process group of its own.
func (d *docsEnv) command(t *testing.T, script, home string, extra ...string) *exec.Cmd {
	os.MkdirAll(home, 0o755)
	cmd := exec.Command("bash", "--noprofile", "--norc", "-c", script)
	cmd.Dir = d.src
	cmd.Env = append(append(append([]string{}, d.env...), "HOME="+home), extra...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	return cmd
}

func docsStopGroup(pgid int) {
	if syscall.Kill(-pgid, syscall.SIGTERM) != nil {
		return
	}
	for i := 0; i < 50; i++ {
		time.Sleep(100 * time.Millisecond)
		if syscall.Kill(-pgid, 0) != nil {
			return
		}
	}
	syscall.Kill(-pgid, syscall.SIGKILL)
}

func (d *docsEnv) runFile(t *testing.T, fi int, file string, blocks []docBlock) (int, map[string]int) {
	skipped := map[string]int{}
	var groups []int
	defer func() {
		for _, g := range groups {
			docsStopGroup(g)
		}
	}()

	// The file's broker, on free ports. ports maps a port of the docs to
	// the port the test uses: the defaults to the broker's, unless a block
	// of the file starts a server of its own on one; those, and all
	// others, to free ports.
	own := map[string]string{}
	ports := map[string]string{}
	served := map[string]bool{}
	for _, b := range blocks {
		if b.skip {
			continue
		}
		for _, ln := range strings.Split(strings.ReplaceAll(b.text, "\\\n", " "), "\n") {
			if strings.Contains(docsStripComment(ln), "hermes serve") {
				for _, m := range docsAddrRE.FindAllStringSubmatch(ln, -1) {
					served[m[2]] = true
				}
			}
		}
	}
	for _, def := range []string{"50051", "8080", "9092", "7070", "50052"} {
		own[def] = docsFreePort(t)
		if !served[def] {
			ports[def] = own[def]
		}
	}
	dir := filepath.Join(d.tmp, fmt.Sprintf("f%02d", fi))
	os.MkdirAll(dir, 0o755)
	logf, _ := os.Create(filepath.Join(dir, "broker.log"))
	defer logf.Close()
	broker := exec.Command(filepath.Join(d.src, "bin", "hermes"), "serve", "--data-dir", filepath.Join(dir, "data"),
		"--grpc-addr", "127.0.0.1:"+own["50051"], "--http-addr", "127.0.0.1:"+own["8080"],
		"--kafka-addr", "127.0.0.1:"+own["9092"], "--wire-addr", "127.0.0.1:"+own["7070"],
		"--raft-addr", "127.0.0.1:"+own["50052"], "--log-level", "warn")
	broker.Stdout, broker.Stderr = logf, logf
	broker.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := broker.Start(); err != nil {
		t.Fatal(err)
	}
	groups = append(groups, broker.Process.Pid)
	exited := make(chan error, 1)
	go func() { exited <- broker.Wait() }()
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get("http://127.0.0.1:" + own["8080"] + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				break
			}
		}
		select {
		case err := <-exited:
			log, _ := os.ReadFile(logf.Name())
			t.Fatalf("%s: the broker exited: %v\n%s", file, err, log)
		default:
		}
		if time.Now().After(deadline) {
			log, _ := os.ReadFile(logf.Name())
			t.Fatalf("%s: the broker is not ready after 30s\n%s", file, log)
		}
		time.Sleep(100 * time.Millisecond)
	}

	rewrite := func(s string) string {
		return docsAddrRE.ReplaceAllStringFunc(s, func(m string) string {
			host, port, _ := strings.Cut(m, ":")
			p, ok := ports[port]
			if !ok {
				p = docsFreePort(t)
				ports[port] = p
			}
			return host + ":" + p
		})
	}

	state := filepath.Join(dir, "state")
	os.MkdirAll(state, 0o755)
	ran := 0
	for bi, b := range blocks {
		where := fmt.Sprintf("%s:%d", file, b.line)
		if b.skip {
			skipped[b.reason]++
			continue
		}
		ran++
		script := rewrite(b.text)
		if b.background != "" {
			var n int
			script, n = docsBackground(script, b.background)
			if n == 0 {
				t.Errorf("%s: background=%q matches no line", where, b.background)
			}
		}
		prologue := "set -eo pipefail\n"
		if b.continues {
			if bi == 0 {
				t.Errorf("%s: continues, but it is the file's first block", where)
			}
			prologue += `. "` + state + `/vars"; cd "$(cat "` + state + `/pwd")"` + "\n"
		}
		prologue += `__docs_save() { for __v in $(compgen -v); do case $__v in BASH*|SHELLOPTS|EUID|PPID|UID|GROUPS|FUNCNAME|PIPESTATUS|LINENO|SECONDS|RANDOM|SRANDOM|EPOCH*|HISTCMD|DIRSTACK|OPTIND|OPTARG|OPTERR|SHLVL|_|__*|COMP_*|PWD|OLDPWD|IFS|PS*|HOSTNAME|HOSTTYPE|MACHTYPE|OSTYPE) continue;; esac; declare -p "$__v"; done 2>/dev/null | grep -v '^declare -[a-zA-Z]*r' > "` + state + `/vars"; pwd > "` + state + `/pwd"; }` + "\ntrap __docs_save EXIT\n"
		if b.setup != "" {
			prologue += "# setup (the docs-test annotation)\n" + rewrite(b.setup) + "\n"
		}
		scriptFile := filepath.Join(dir, fmt.Sprintf("block%02d.sh", bi))
		os.WriteFile(scriptFile, []byte(prologue+"# "+where+"\n"+script), 0o644)
		outFile := filepath.Join(dir, fmt.Sprintf("block%02d.out", bi))
		out, _ := os.Create(outFile)
		cmd := d.command(t, `. "`+scriptFile+`"`, filepath.Join(dir, fmt.Sprintf("home%02d", bi)), "HERMES_ADDR=127.0.0.1:"+own["50051"])
		cmd.Stdout, cmd.Stderr = out, out // files, not pipes: what it leaves running does not hold Wait
		bstart := time.Now()
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		groups = append(groups, cmd.Process.Pid)
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		var runErr error
		select {
		case runErr = <-done:
		case <-time.After(b.timeout):
			docsStopGroup(cmd.Process.Pid)
			<-done
			runErr = fmt.Errorf("timed out after %v (a command that runs until stopped? annotate it background=\"...\")", b.timeout)
		}
		out.Close()
		if runErr != nil {
			t.Errorf("%s: the block failed: %v\n--- script (as run) ---\n%s--- output (last lines) ---\n%s", where, runErr, script, docsTail(outFile, 40))
			d.failed = append(d.failed, fmt.Sprintf("%s (after %v): %v\n%s", where, time.Since(bstart).Round(100*time.Millisecond), runErr, docsTail(outFile, 15)))
		} else {
			t.Logf("  %s ok (%v)", where, time.Since(bstart).Round(100*time.Millisecond))
		}
	}
	select {
	case err := <-exited:
		log, _ := os.ReadFile(logf.Name())
		t.Errorf("%s: the file's broker exited during the blocks: %v\n%s", file, err, log)
	default:
	}
	return ran, skipped
}

func docsTail(path string, n int) string {
	data, _ := os.ReadFile(path)
	var lines []string
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	if len(lines) > n {
		lines = append([]string{"..."}, lines[len(lines)-n:]...)
	}
	return strings.Join(lines, "\n") + "\n"
}

// sourceForbidden are the docsForbidden patterns that apply to the text
// of the SDKs, the console and the deployment files too (the session
// patterns do not: a subscription's "next session" is an SDK's word).
func sourceForbidden() []struct{ re, why string } {
	var out []struct{ re, why string }
	for _, fb := range docsForbidden {
		if !strings.Contains(fb.why, "session") {
			out = append(out, fb)
		}
	}
	return out
}

// TestUserFacingText: what users read besides the docs says nothing of
// how Hermes was made either: the help of every command of the built
// binary (docsForbidden, all of it), and the sources of the SDKs, the
// console, the protocol definitions and the deployment files
// (sourceForbidden; lockfiles, which name their registries, are not read).
func TestUserFacingText(t *testing.T) {
	bin := testcluster.Binary(t)
	seen := map[string]bool{}
	var walk func(path []string)
	walk = func(path []string) {
		key := strings.Join(path, " ")
		if seen[key] {
			return
		}
		seen[key] = true
		out, err := exec.Command(bin, append(path, "--help")...).CombinedOutput()
		if err != nil {
			t.Fatalf("hermes %s --help: %v\n%s", key, err, out)
		}
		text := string(out)
		for _, fb := range docsForbidden {
			if m := regexp.MustCompile(fb.re).FindString(text); m != "" {
				t.Errorf("hermes %s --help: %s: %q", key, fb.why, m)
			}
		}
		_, cmds, ok := strings.Cut(text, "Available Commands:\n")
		if !ok {
			return
		}
		cmds, _, _ = strings.Cut(cmds, "\n\n")
		for _, ln := range strings.Split(cmds, "\n") {
			if f := strings.Fields(ln); len(f) > 0 {
				walk(append(append([]string(nil), path...), f[0]))
			}
		}
	}
	walk(nil)
	if len(seen) < 40 {
		t.Fatalf("read the help of only %d commands", len(seen))
	}

	root := docsRoot(t)
	var files []string
	for _, dir := range []string{"clients/python/src", "clients/typescript/src", "clients/rust/src", "pkg", "proto", "web/console/src", "deploy"} {
		filepath.WalkDir(filepath.Join(root, dir), func(p string, d os.DirEntry, err error) error {
			if err == nil && !d.IsDir() && !strings.HasSuffix(p, "_test.go") && !strings.Contains(p, "lock") {
				files = append(files, p)
			}
			return nil
		})
	}
	if len(files) < 50 {
		t.Fatalf("found only %d source files", len(files))
	}
	pats := sourceForbidden()
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, fb := range pats {
			re := regexp.MustCompile(fb.re)
			for i, ln := range strings.Split(string(data), "\n") {
				if m := re.FindString(ln); m != "" {
					rel, _ := filepath.Rel(root, f)
					t.Errorf("%s:%d: %s: %q", rel, i+1, fb.why, strings.TrimSpace(m))
				}
			}
		}
	}
	t.Logf("help of %d commands and %d source files read", len(seen), len(files))
}
