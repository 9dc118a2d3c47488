package bench

import (
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// cpuUse is CPU time spent so far by the whole machine (every process,
// PostgreSQL's included) and by this process (the load generator and, by
// default, the orderd it started). Differences of two readings, divided by
// the work done between them, are costs per order: unlike rates, they hold
// still when a shared machine is busy with someone else.
type cpuUse struct {
	machine, self time.Duration
	ok            bool
}

func readCPU() cpuUse {
	var u cpuUse
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return u
	}
	u.self = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return u
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	// cpu user nice system idle iowait irq softirq steal ...
	if len(f) < 8 || f[0] != "cpu" {
		return u
	}
	var ticks int64
	for _, i := range []int{1, 2, 3, 6, 7} {
		n, err := strconv.ParseInt(f[i], 10, 64)
		if err != nil {
			return u
		}
		ticks += n
	}
	// USER_HZ is 100 on every Linux that Go supports.
	u.machine = time.Duration(ticks) * 10 * time.Millisecond
	u.ok = true
	return u
}

// perUnit adds to extra the CPU microseconds per unit of work spent between
// from and now, by the machine and by this process, under name.
func perUnit(extra map[string]any, name string, from cpuUse, units int64) {
	to := readCPU()
	if !from.ok || !to.ok || units <= 0 {
		return
	}
	extra[name+"_cpu_us"] = round1(float64((to.machine - from.machine).Microseconds()) / float64(units))
	extra[name+"_bench_process_cpu_us"] = round1(float64((to.self - from.self).Microseconds()) / float64(units))
}
