package bench

import (
	"context"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// cpuUse is CPU time spent so far by each party to a run, read from /proc:
// the whole machine, the load generator (this process), the orderd
// server processes and the PostgreSQL cluster. Differences of two readings,
// divided by the work done between them, are costs per order: unlike rates,
// they hold still when a shared machine is busy with someone else, and per
// process they say who spent it.
type cpuUse struct {
	at                                   time.Time
	machine, generator, orderd, postgres time.Duration
	machineOK, orderdOK, postgresOK      bool
	// inProcess: the server runs in the generator's process, so the
	// generator's figure is both.
	inProcess bool
	// nodes are each database server's, in the order of Target.nodes;
	// postgres is their sum.
	nodes []nodeUse
}

// readCPU reads every party's CPU time.
func (t *Target) readCPU() cpuUse {
	u := cpuUse{at: time.Now(), inProcess: t.InProcess}
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err == nil {
		u.generator = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	u.machine, u.machineOK = machineCPU()
	if pids := t.serverPIDs(); len(pids) > 0 && !t.InProcess {
		u.orderdOK = true
		for _, pid := range pids {
			own, _, ok := procCPU(pid)
			u.orderdOK = u.orderdOK && ok
			u.orderd += own
		}
	}
	u.postgresOK = len(t.nodes()) > 0
	for _, n := range t.nodes() {
		nu := nodeUse{sessions: n.sessions(context.Background())}
		if pm := n.postmasterPID(); pm > 0 {
			nu.cpu, nu.cpuOK = treeCPU(pm)
		}
		u.postgresOK = u.postgresOK && nu.cpuOK
		u.postgres += nu.cpu
		u.nodes = append(u.nodes, nu)
	}
	return u
}

func (t *Target) serverPIDs() []int {
	if t.ServerPIDs == nil {
		return nil
	}
	return t.ServerPIDs()
}

type statFields struct {
	comm                         string
	ppid                         int
	utime, stime, cutime, cstime int64 // clock ticks
}

// procStat parses /proc/<pid>/stat.
func procStat(pid int) (statFields, bool) {
	var f statFields
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return f, false
	}
	s := string(b)
	open, closing := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
	if open < 0 || closing < open {
		return f, false
	}
	f.comm = s[open+1 : closing]
	// Fields from the 3rd (state) on; utime is the 14th.
	rest := strings.Fields(s[closing+1:])
	if len(rest) < 15 {
		return f, false
	}
	ints := make([]int64, 15)
	for i := 1; i < 15; i++ {
		n, err := strconv.ParseInt(rest[i], 10, 64)
		if err != nil {
			return f, false
		}
		ints[i] = n
	}
	f.ppid = int(ints[1])
	f.utime, f.stime, f.cutime, f.cstime = ints[11], ints[12], ints[13], ints[14]
	return f, true
}

// ticks converts clock ticks: USER_HZ is 100 on every Linux that Go supports.
func ticks(n int64) time.Duration { return time.Duration(n) * 10 * time.Millisecond }

// procCPU is a process's own CPU time, and that of its children it has
// reaped.
func procCPU(pid int) (own, reaped time.Duration, ok bool) {
	f, ok := procStat(pid)
	if !ok {
		return 0, 0, false
	}
	return ticks(f.utime + f.stime), ticks(f.cutime + f.cstime), true
}

// treeCPU is the CPU time of a postmaster and its cluster: its own, its
// live children's (backends, background workers) and, through its reaped
// children's count, that of backends that have exited.
func treeCPU(root int) (time.Duration, bool) {
	own, reaped, ok := procCPU(root)
	if !ok {
		return 0, false
	}
	total := own + reaped
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return 0, false
	}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if f, ok := procStat(pid); ok && f.ppid == root {
			total += ticks(f.utime + f.stime)
		}
	}
	return total, true
}

// machineCPU is the busy time of every CPU from /proc/stat.
func machineCPU() (time.Duration, bool) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, false
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	// cpu user nice system idle iowait irq softirq steal ...
	if len(f) < 8 || f[0] != "cpu" {
		return 0, false
	}
	var n int64
	for _, i := range []int{1, 2, 3, 6, 7} {
		v, err := strconv.ParseInt(f[i], 10, 64)
		if err != nil {
			return 0, false
		}
		n += v
	}
	return ticks(n), true
}

// perUnit adds to extra the CPU microseconds per unit of work spent between
// from and now, under name: by the machine, the generator, orderd and
// PostgreSQL, each where it could be read; and returns them with each
// database node's share (nil for no units).
func (t *Target) perUnit(extra map[string]any, name string, from cpuUse, units int64) *Cost {
	if units <= 0 {
		return nil
	}
	to := t.readCPU()
	us := func(d time.Duration) float64 { return round1(float64(d.Microseconds()) / float64(units)) }
	if from.machineOK && to.machineOK {
		extra[name+"_cpu_us"] = us(to.machine - from.machine)
	}
	if from.inProcess {
		extra[name+"_orderd_and_generator_cpu_us"] = us(to.generator - from.generator)
	} else {
		extra[name+"_generator_cpu_us"] = us(to.generator - from.generator)
	}
	if from.orderdOK && to.orderdOK {
		extra[name+"_orderd_cpu_us"] = us(to.orderd - from.orderd)
	}
	if from.postgresOK && to.postgresOK {
		extra[name+"_postgres_cpu_us"] = us(to.postgres - from.postgres)
	}
	return t.cost(name, from, to, units)
}
