package bench

import (
	"maps"
	"sync"
)

// errorTable counts failures by kind and keeps the first message of each.
type errorTable struct {
	mu      sync.Mutex
	counts  map[string]int64  // Lock: mu.
	samples map[string]string // Lock: mu.
}

func (e *errorTable) init() {
	e.counts, e.samples = map[string]int64{}, map[string]string{}
}

// maxSample bounds a kept error message.
const maxSample = 300

func (e *errorTable) add(kind string, err error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.counts[kind]++
	if _, ok := e.samples[kind]; !ok && err != nil {
		s := err.Error()
		if len(s) > maxSample {
			s = s[:maxSample] + "..."
		}
		e.samples[kind] = s
	}
}

func (e *errorTable) total() int64 {
	e.mu.Lock()
	defer e.mu.Unlock()
	var n int64
	for _, c := range e.counts {
		n += c
	}
	return n
}

func (e *errorTable) snapshot() (map[string]int64, map[string]string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return maps.Clone(e.counts), maps.Clone(e.samples)
}
