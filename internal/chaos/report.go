package chaos

import (
	"encoding/json"
	"fmt"
	"html"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// Write puts the report in dir: report.txt, report.json, timeline.svg,
// and the whole history as history.json (for replaying the checker).
func (r *Report) Write(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "report.txt"), []byte(r.Text()), 0o644); err != nil {
		return err
	}
	js, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "report.json"), js, 0o644); err != nil {
		return err
	}
	r.h.mu.Lock()
	hist, err := json.Marshal(map[string]any{"publishes": r.h.publishes, "polls": r.h.polls,
		"commits": r.h.commits, "faults": r.h.faults, "errors": r.h.errors})
	r.h.mu.Unlock()
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "history.json"), hist, 0o644); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "timeline.svg"), []byte(r.SVG()), 0o644)
}

// SVG is a timeline: acknowledged and failed publishes per second by mode,
// records the group received, and the faults as bands below.
func (r *Report) SVG() string {
	r.h.mu.Lock()
	defer r.h.mu.Unlock()
	secs := int(r.Elapsed/time.Second) + 1
	series := map[string][]int{}
	bump := func(name string, at time.Duration, n int) {
		s := series[name]
		if s == nil {
			s = make([]int, secs)
			series[name] = s
		}
		if i := int(at / time.Second); i >= 0 && i < secs {
			s[i] += n
		}
	}
	for _, op := range r.h.publishes {
		if op.OK {
			bump(op.Mode, op.End, len(op.Values))
		} else {
			bump("failed", op.End, len(op.Values))
		}
	}
	for _, p := range r.h.polls {
		bump("received", p.At, 1)
	}
	peak := 1
	for _, s := range series {
		for _, v := range s {
			peak = max(peak, v)
		}
	}
	const w, plotH, left, top = 1200.0, 260.0, 60.0, 30.0
	faultRows := map[string]int{}
	for _, f := range r.h.faults {
		if _, ok := faultRows[f.Name]; !ok {
			faultRows[f.Name] = len(faultRows)
		}
	}
	h := top + plotH + 30 + float64(len(faultRows))*18 + 20
	x := func(t float64) float64 { return left + t/float64(secs)*(w-left-20) }
	y := func(v int) float64 { return top + plotH - float64(v)/float64(peak)*plotH }
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%.0f" height="%.0f" font-family="sans-serif" font-size="11">`+"\n", w, h)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	verdict := "valid"
	if !r.Valid {
		verdict = "INVALID: " + strings.Join(r.Violated(), ", ")
	}
	fmt.Fprintf(&b, `<text x="%.0f" y="16" font-size="13">Hermes fault campaign, seed %d, %d nodes: %s (records per second)</text>`+"\n", left, r.Seed, r.Nodes, html.EscapeString(verdict))
	// Fault bands behind the plot.
	for _, f := range r.h.faults {
		end := f.End
		if end < 0 {
			end = r.Elapsed
		}
		x0, x1 := x(f.Start.Seconds()), x(end.Seconds())
		row := top + plotH + 30 + float64(faultRows[f.Name])*18
		fmt.Fprintf(&b, `<rect x="%.1f" y="%.0f" width="%.1f" height="%.0f" fill="#f5e6c8" opacity="0.6"><title>%s %s</title></rect>`+"\n",
			x0, top, max(x1-x0, 1), plotH, html.EscapeString(f.Name), html.EscapeString(f.Detail))
		fmt.Fprintf(&b, `<rect x="%.1f" y="%.0f" width="%.1f" height="14" fill="#d08c2c"><title>%s %s</title></rect>`+"\n",
			x0, row, max(x1-x0, 1), html.EscapeString(f.Name), html.EscapeString(f.Detail))
	}
	for name, row := range faultRows {
		fmt.Fprintf(&b, `<text x="2" y="%.0f">%s</text>`+"\n", top+plotH+41+float64(row)*18, html.EscapeString(name))
	}
	// Axes.
	fmt.Fprintf(&b, `<line x1="%.0f" y1="%.0f" x2="%.0f" y2="%.0f" stroke="black"/>`+"\n", left, top+plotH, w-20, top+plotH)
	fmt.Fprintf(&b, `<line x1="%.0f" y1="%.0f" x2="%.0f" y2="%.0f" stroke="black"/>`+"\n", left, top, left, top+plotH)
	fmt.Fprintf(&b, `<text x="2" y="%.0f">%d/s</text>`+"\n", top+4, peak)
	step := max(secs/12, 1)
	for s := 0; s <= secs; s += step {
		fmt.Fprintf(&b, `<text x="%.1f" y="%.0f" text-anchor="middle">%ds</text>`+"\n", x(float64(s)), top+plotH+14, s)
	}
	colors := []struct{ name, color string }{
		{"consistent", "#1f6fb2"}, {"eventual", "#2ca02c"}, {"performance", "#9467bd"},
		{"received", "#7f7f7f"}, {"failed", "#d62728"},
	}
	for i, c := range colors {
		s := series[c.name]
		fmt.Fprintf(&b, `<text x="%.0f" y="%.0f" fill="%s">%s</text>`+"\n", w-520+float64(i)*95, 16.0, c.color, c.name)
		if s == nil {
			continue
		}
		var pts []string
		for i, v := range s {
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", x(float64(i)+0.5), y(v)))
		}
		fmt.Fprintf(&b, `<polyline fill="none" stroke="%s" stroke-width="1.2" points="%s"/>`+"\n", c.color, strings.Join(pts, " "))
	}
	b.WriteString("</svg>\n")
	return b.String()
}
