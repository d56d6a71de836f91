// Command hermes-chaos runs Hermes' fault campaign: a cluster of real
// nodes in network namespaces of their own, a workload in every delivery
// mode, faults drawn from a seed, and a checker. It needs root.
//
//	hermes-chaos -duration 30m            # faults drawn at random for 30 minutes
//	hermes-chaos -rounds 1                # every nemesis once (the CI campaign)
//	hermes-chaos -seed 42 -nemeses isolate,power-failure
//
// It exits 0 when no safety property was violated, 1 when one was, 2 when
// the campaign itself could not run.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/hermes-mq/hermes/internal/chaos"
)

func main() {
	var cfg chaos.Config
	var nemeses, out, dir string
	var keep bool
	seed := flag.Uint64("seed", 0, "seed of the schedule (0: one drawn from the clock, printed so the run can be replayed)")
	flag.DurationVar(&cfg.Duration, "duration", 5*time.Minute, "how long faults are injected (ignored with -rounds)")
	flag.IntVar(&cfg.Rounds, "rounds", 0, "run every nemesis this many times, in an order drawn from the seed, instead of for -duration")
	flag.IntVar(&cfg.Nodes, "nodes", 3, "nodes of the cluster")
	flag.StringVar(&nemeses, "nemeses", "all", "comma-separated nemeses to draw from (see -list)")
	flag.StringVar(&cfg.Binary, "bin", "bin/hermes", "the hermes binary the nodes run")
	flag.StringVar(&dir, "dir", "", "where the nodes keep their data and logs (default: a new temporary directory, removed after a valid run)")
	flag.StringVar(&out, "out", "chaos-report", "where the report goes: report.txt, report.json, timeline.svg, history.json")
	flag.BoolVar(&keep, "keep", false, "keep the nodes' data and logs after a valid run too")
	flag.DurationVar(&cfg.HoldMin, "hold-min", 3*time.Second, "shortest time a fault is held")
	flag.DurationVar(&cfg.HoldMax, "hold-max", 8*time.Second, "longest time a fault is held")
	flag.DurationVar(&cfg.Quiet, "quiet", 3*time.Second, "pause between faults")
	flag.Int64Var(&cfg.DiskBytes, "disk-bytes", 1<<30, "each node's data on an ext4 file system of this size of its own, for disk-full (0: on the host's)")
	flag.Float64Var(&cfg.Rate, "rate", 100, "publish requests per second per producer (5 producers)")
	list := flag.Bool("list", false, "list the nemeses and exit")
	flag.Parse()
	if *list {
		docs := chaos.NemesisDocs()
		names := chaos.Nemeses()
		sort.Strings(names)
		for _, n := range names {
			fmt.Printf("%-22s %s\n", n, docs[n])
		}
		return
	}
	cfg.Seed = *seed
	if cfg.Seed == 0 {
		cfg.Seed = uint64(time.Now().UnixNano()) % 1_000_000
	}
	if nemeses != "" {
		cfg.Nemeses = strings.Split(nemeses, ",")
	}
	tmp := dir == ""
	if tmp {
		d, err := os.MkdirTemp("", "hermes-chaos-")
		if err != nil {
			fatal(err)
		}
		dir = d
	}
	cfg.Dir = dir
	cfg.Logf = func(format string, args ...any) { fmt.Printf(format+"\n", args...) }
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	fmt.Printf("hermes-chaos: seed %d (replay with -seed %d)\n", cfg.Seed, cfg.Seed)
	r, err := chaos.Run(ctx, cfg)
	if err != nil {
		fatal(fmt.Errorf("%v (node logs in %s)", err, dir))
	}
	if err := r.Write(out); err != nil {
		fatal(err)
	}
	fmt.Print("\n" + r.Text())
	abs, _ := filepath.Abs(out)
	fmt.Printf("\nreport: %s/report.txt, report.json, timeline.svg\n", abs)
	if !r.Valid {
		fmt.Printf("node data and logs kept in %s\n", dir)
		os.Exit(1)
	}
	if tmp && !keep {
		os.RemoveAll(dir)
	} else {
		fmt.Printf("node data and logs in %s\n", dir)
	}
}

func fatal(err error) {
	fmt.Fprintln(os.Stderr, "hermes-chaos:", err)
	os.Exit(2)
}
