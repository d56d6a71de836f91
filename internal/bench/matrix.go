package bench

import (
	"context"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"
)

// MatrixCell is one workload of `hermes bench matrix`.
type MatrixCell struct {
	Table   string  `json:"table"` // "size" (size/worker matrix) or "rate" (fixed-rate table)
	Name    string  `json:"name"`
	Size    int     `json:"size"`
	Workers int     `json:"workers"`
	Count   int64   `json:"count,omitempty"`
	Rate    float64 `json:"rate,omitempty"`
}

// SizeMatrix is the size/worker table: payload sizes with one worker,
// then 1 KB with 4, 8 and 16 workers, then a sustained 1 KB load; each a
// fixed count of records, closed loop.
var SizeMatrix = []MatrixCell{
	{"size", "Tiny (100B)", 100, 1, 5000, 0},
	{"size", "Small (1KB)", 1024, 1, 5000, 0},
	{"size", "Medium (10KB)", 10240, 1, 2000, 0},
	{"size", "Large (100KB)", 102400, 1, 500, 0},
	{"size", "4 workers (1KB)", 1024, 4, 10000, 0},
	{"size", "8 workers (1KB)", 1024, 8, 10000, 0},
	{"size", "16 workers (1KB)", 1024, 16, 20000, 0},
	{"size", "Sustained (1KB x 8)", 1024, 8, 50000, 0},
}

// RateTable is the fixed-rate latency table: one producer, one
// consumer, ~78-byte payloads, open loop at each rate.
var RateTable = func() []MatrixCell {
	var cells []MatrixCell
	for _, r := range []float64{1000, 5000, 10000, 25000, 50000, 100000} {
		cells = append(cells, MatrixCell{"rate", fmt.Sprintf("%gK msgs/s", r/1000), 78, 1, 0, r})
	}
	return cells
}()

// MatrixRow is one cell run against one target.
type MatrixRow struct {
	Cell       MatrixCell `json:"cell"`
	Target     string     `json:"target"`
	Error      string     `json:"error,omitempty"`
	MsgsPerSec float64    `json:"msgs_per_s"`
	MBPerSec   float64    `json:"mb_per_s"`
	Ack        Latency    `json:"ack_latency"`
	E2E        Latency    `json:"e2e_latency"`
	Lost       int64      `json:"lost"`
	Duplicates int64      `json:"duplicates"`
	Corrupt    int64      `json:"corrupt"`
	Errors     int64      `json:"errors"`
	Passed     bool       `json:"passed"`
	BrokerCPU  float64    `json:"broker_cpu_cores,omitempty"`
	ClientCPU  float64    `json:"client_cpu_cores,omitempty"`
	durability string
}

// MatrixReport is the JSON document of `hermes bench matrix`.
type MatrixReport struct {
	Tool       string            `json:"tool"`
	StartedAt  time.Time         `json:"started_at"`
	Machine    Machine           `json:"machine"`
	Flags      map[string]string `json:"flags,omitempty"`
	Settings   string            `json:"settings"`
	Durability map[string]string `json:"durability"`
	Rows       []MatrixRow       `json:"rows"`
}

// MatrixOptions say what RunMatrix runs.
type MatrixOptions struct {
	Targets []string
	Tables  []string // "size", "rate"
	// RateDuration is how long each cell of the rate table publishes.
	RateDuration time.Duration
	// PIDs are the broker processes of each target, for their CPU.
	PIDs map[string][]int
	// Log receives one line per cell run.
	Log io.Writer
}

// RunMatrix runs the chosen tables against each target in turn, with the
// settings of base (mode, protocol, addresses, ...) and scenario live.
// A cell that cannot run is reported in its row, not as an error.
func RunMatrix(ctx context.Context, base Config, o MatrixOptions) *MatrixReport {
	rep := &MatrixReport{Tool: "hermes bench matrix", StartedAt: time.Now(), Machine: DescribeMachine(), Durability: map[string]string{},
		Settings: fmt.Sprintf("scenario live, mode %s (Kafka: acks mapped from the mode), protocol %s, %d partition(s), linger %v, every record verified",
			base.Mode, base.Protocol, base.Partitions, base.Linger)}
	for _, target := range o.Targets {
		for _, table := range o.Tables {
			cells := SizeMatrix
			if table == "rate" {
				cells = RateTable
			}
			for _, cell := range cells {
				if ctx.Err() != nil {
					return rep
				}
				row := runCell(ctx, base, target, cell, o)
				rep.Rows = append(rep.Rows, row)
				if o.Log != nil {
					fmt.Fprintf(o.Log, "%-6s %-22s %10.0f msgs/s  ack p99 %s ms  e2e p99 %s ms  lost %d  %s\n",
						target, cell.Name, row.MsgsPerSec, ms(row.Ack.P99), ms(row.E2E.P99), row.Lost, row.Error)
				}
				if row.Error == "" && rep.Durability[target] == "" {
					rep.Durability[target] = row.durability
				}
			}
		}
	}
	return rep
}

func runCell(ctx context.Context, base Config, target string, cell MatrixCell, o MatrixOptions) (row MatrixRow) {
	cfg := base
	cfg.Target, cfg.Scenario, cfg.Size, cfg.Workers = target, ScenarioLive, cell.Size, cell.Workers
	cfg.Count, cfg.Rate, cfg.Progress, cfg.BrokerPIDs = cell.Count, cell.Rate, nil, o.PIDs[target]
	if cell.Rate > 0 {
		cfg.Count, cfg.Duration = 0, o.RateDuration
	}
	row = MatrixRow{Cell: cell, Target: target}
	rep, err := Run(ctx, cfg)
	if err != nil {
		row.Error = err.Error()
		return row
	}
	row.durability = rep.Durability
	row.MsgsPerSec, row.MBPerSec, row.Ack = rep.Publish.MsgsPerSec, rep.Publish.MBPerSec, rep.Publish.AckLatency
	row.E2E, row.Passed = rep.Subscribe.E2ELatency, rep.Passed
	v := rep.Verification
	row.Lost, row.Duplicates, row.Corrupt = v.Lost, v.Duplicates, v.Corrupt
	for _, n := range rep.Errors {
		row.Errors += n
	}
	if rep.BrokerCPU != nil {
		for _, c := range rep.BrokerCPU.Publish {
			row.BrokerCPU += c.Cores
		}
	}
	if rep.ClientCPU != nil {
		row.ClientCPU = rep.ClientCPU.Publish.Cores
	}
	return row
}

// Markdown writes the tables: per cell, one column group per target.
func (m *MatrixReport) Markdown(w io.Writer) {
	fmt.Fprintf(w, "Machine: %s, %d cores, %s %s, %s. %s.\n\n", m.Machine.CPUModel, m.Machine.Cores, m.Machine.OS, m.Machine.Kernel, m.Machine.GoVersion, m.Settings)
	for _, t := range sortedKeys(m.Durability) {
		fmt.Fprintf(w, "- **%s**: %s\n", t, m.Durability[t])
	}
	m.sizeTable(w)
	m.rateTable(w)
}

func (m *MatrixReport) sizeTable(w io.Writer) {
	rows := m.rowsOf("size")
	if len(rows) == 0 {
		return
	}
	fmt.Fprintln(w, "\n### Sizes and workers (closed loop, fixed counts)")
	fmt.Fprintln(w, "\n| test | target | msgs/s | MB/s | ack p50 / p99 ms | e2e p50 / p99 ms | lost | dup | errors | broker CPU | load generator CPU |")
	fmt.Fprintln(w, "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
	for _, r := range rows {
		if r.Error != "" {
			fmt.Fprintf(w, "| %s | %s | error: %s | | | | | | | | |\n", r.Cell.Name, r.Target, strings.ReplaceAll(r.Error, "|", "/"))
			continue
		}
		fmt.Fprintf(w, "| %s | %s | %.0f | %.2f | %s / %s | %s / %s | %d | %d | %d | %s | %s |\n", r.Cell.Name, r.Target, r.MsgsPerSec, r.MBPerSec,
			ms(r.Ack.P50), ms(r.Ack.P99), ms(r.E2E.P50), ms(r.E2E.P99), r.Lost, r.Duplicates, r.Errors, cores(r.BrokerCPU), cores(r.ClientCPU))
	}
}

func (m *MatrixReport) rateTable(w io.Writer) {
	rows := m.rowsOf("rate")
	if len(rows) == 0 {
		return
	}
	fmt.Fprintln(w, "\n### Fixed rate (1 producer, 1 consumer, 78-byte payloads, open loop)")
	fmt.Fprintln(w, "\nEnd-to-end latency in ms, from when each record was due to its delivery.")
	fmt.Fprintln(w, "\n| rate | target | achieved msgs/s | p25 | p50 | p90 | p99 | p99.9 | max | lost |")
	fmt.Fprintln(w, "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|")
	for _, r := range rows {
		if r.Error != "" {
			fmt.Fprintf(w, "| %s | %s | error: %s | | | | | | | |\n", r.Cell.Name, r.Target, strings.ReplaceAll(r.Error, "|", "/"))
			continue
		}
		l := r.E2E
		fmt.Fprintf(w, "| %s | %s | %.0f | %s | %s | %s | %s | %s | %s | %d |\n", r.Cell.Name, r.Target, r.MsgsPerSec,
			ms(l.P25), ms(l.P50), ms(l.P90), ms(l.P99), ms(l.P999), ms(l.Max), r.Lost)
	}
}

// rowsOf returns the rows of one table, grouped by cell then target.
func (m *MatrixReport) rowsOf(table string) []MatrixRow {
	var out []MatrixRow
	cells := SizeMatrix
	if table == "rate" {
		cells = RateTable
	}
	for _, c := range cells {
		for _, r := range m.Rows {
			if r.Cell == c {
				out = append(out, r)
			}
		}
	}
	return out
}

func cores(c float64) string {
	if c == 0 {
		return "–"
	}
	return fmt.Sprintf("%.2f cores", c)
}

func sortedKeys(m map[string]string) []string { return slices.Sorted(maps.Keys(m)) }
