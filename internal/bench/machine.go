package bench

import (
	"bufio"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"
)

// Machine describes where a run happened.
type Machine struct {
	CPUModel  string `json:"cpu_model"`
	Cores     int    `json:"cores"`
	OS        string `json:"os"`
	Kernel    string `json:"kernel,omitempty"`
	Arch      string `json:"arch"`
	GoVersion string `json:"go_version"`
	Hostname  string `json:"hostname,omitempty"`
	MemTotal  string `json:"mem_total,omitempty"`
}

// DescribeMachine reads the machine's description (Linux /proc where it
// exists; fields it cannot read stay empty).
func DescribeMachine() Machine {
	m := Machine{Cores: runtime.NumCPU(), OS: runtime.GOOS, Arch: runtime.GOARCH, GoVersion: runtime.Version()}
	m.CPUModel = procField("/proc/cpuinfo", "model name")
	m.MemTotal = procField("/proc/meminfo", "MemTotal")
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.Kernel = strings.TrimSpace(string(b))
	}
	m.Hostname, _ = os.Hostname()
	return m
}

// procField returns the value of the first "key : value" line of path.
func procField(path, key string) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if ok && strings.TrimSpace(k) == key {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

// clockTicks is USER_HZ, the unit of /proc/PID/stat times: 100 on every
// Linux architecture Go supports (the kernel fixes it for user space).
const clockTicks = 100

// cpuTime returns the user+system CPU time pid has used so far, from
// /proc/PID/stat (fields 14 and 15).
func cpuTime(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// The command name (field 2) is in parentheses and may hold spaces:
	// count fields after the last ')'.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, fmt.Errorf("/proc/%d/stat: unexpected format", pid)
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 13 { // f[0] is field 3
		return 0, fmt.Errorf("/proc/%d/stat: too few fields", pid)
	}
	ut, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("/proc/%d/stat: bad utime/stime", pid)
	}
	return time.Duration(ut+st) * time.Second / clockTicks, nil
}

// cpuSample is the CPU time of each broker process at one moment; a
// process that could not be read is absent.
type cpuSample struct {
	at   time.Time
	used map[int]time.Duration
}

func sampleCPU(pids []int) cpuSample {
	s := cpuSample{at: time.Now(), used: make(map[int]time.Duration, len(pids))}
	for _, pid := range pids {
		if d, err := cpuTime(pid); err == nil {
			s.used[pid] = d
		}
	}
	return s
}

// BrokerCPU is the CPU the broker processes used between two samples.
type BrokerCPU struct {
	PID int `json:"pid"`
	// Seconds of CPU (user+system) used in the interval; Cores is that
	// divided by the interval's length.
	Seconds float64 `json:"cpu_seconds"`
	Cores   float64 `json:"cores"`
}

// cpuBetween returns what each process used from a to b (processes
// missing in either sample, e.g. killed, are left out).
func cpuBetween(a, b cpuSample) []BrokerCPU {
	var out []BrokerCPU
	wall := b.at.Sub(a.at).Seconds()
	for pid, u0 := range a.used {
		u1, ok := b.used[pid]
		if !ok || wall <= 0 {
			continue
		}
		sec := (u1 - u0).Seconds()
		out = append(out, BrokerCPU{PID: pid, Seconds: sec, Cores: sec / wall})
	}
	return out
}
