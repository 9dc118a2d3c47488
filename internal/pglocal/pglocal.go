// Package pglocal finds a PostgreSQL to use on this machine, or starts a
// private one: the dev command, the benchmark and the tests all need one and
// must not ask the user to set anything up.
package pglocal

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// ErrNotFound is returned, wrapped in one line that says how to get a
// PostgreSQL, when there is no server to use and none can be started.
var ErrNotFound = errors.New("no PostgreSQL found")

func notFound(envVar string) error {
	if envVar == "" {
		envVar = "DATABASE_URL"
	}
	return fmt.Errorf("%w: set %s, run one on localhost:5432, or install it (apt-get install postgresql)", ErrNotFound, envVar)
}

// Options says where to look.
type Options struct {
	// EnvVar names an environment variable holding a URL to use first; empty skips it.
	EnvVar string
	// DataDir is where a private cluster lives when one must be started.
	DataDir string
	// SkipLocalhost skips the server on localhost:5432.
	SkipLocalhost bool
	// Fast trades durability for speed in a private cluster (tests only).
	Fast bool
	// Settings are extra name=value server settings for a private cluster
	// this call starts.
	Settings []string
	Logf     func(format string, args ...any)
}

// Instance is a server to use.
type Instance struct {
	// URL is an admin URL to the server's "postgres" database.
	URL     string
	Started bool
	dataDir string
	bin     string
	runAs   []string
}

// DatabaseURL returns the URL of another database on the same server.
func (i *Instance) DatabaseURL(name string) string {
	cfg, err := pgx.ParseConfig(i.URL)
	if err != nil {
		return i.URL
	}
	u := fmt.Sprintf("postgres://%s@%s:%d/%s?sslmode=disable", cfg.User, cfg.Host, cfg.Port, name)
	if cfg.Password != "" {
		u = fmt.Sprintf("postgres://%s:%s@%s:%d/%s?sslmode=disable", cfg.User, cfg.Password, cfg.Host, cfg.Port, name)
	}
	return u
}

// DataDir is the cluster's data directory, when this process started it.
func (i *Instance) DataDir() string { return i.dataDir }

// Port is the port the server listens on.
func (i *Instance) Port() int {
	cfg, err := pgx.ParseConfig(i.URL)
	if err != nil {
		return 0
	}
	return int(cfg.Port)
}

// BaseBackup copies the running cluster into dir/data with pg_basebackup,
// WAL included, so that Find with DataDir dir starts the copy. With standby
// the copy starts as a streaming replica of this cluster (-R); without, it
// is a base backup for a point-in-time restore.
func (i *Instance) BaseBackup(ctx context.Context, dir string, standby bool) error {
	if i.bin == "" {
		return errors.New("pglocal: a base backup is taken only of a cluster this process started")
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("create %s: %w", dir, err)
	}
	if _, err := runAsPostgres(dir); err != nil {
		return err
	}
	args := []string{"-d", i.URL, "-D", filepath.Join(dir, "data"), "-X", "stream", "-c", "fast", "--no-sync"}
	if standby {
		args = append(args, "-R")
	}
	if out, err := i.command(ctx, "pg_basebackup", args...).CombinedOutput(); err != nil {
		return fmt.Errorf("pg_basebackup: %w: %s", err, oneLine(out))
	}
	return nil
}

// Promote ends a standby's recovery and waits until it accepts writes.
func (i *Instance) Promote(ctx context.Context) error {
	if out, err := i.command(ctx, "pg_ctl", "-D", i.dataDir, "-w", "-t", "60", "promote").CombinedOutput(); err != nil {
		return fmt.Errorf("pg_ctl promote: %w: %s", err, oneLine(out))
	}
	return nil
}

// Kill ends the cluster the way a lost machine does: SIGKILL to the
// postmaster and every process it started, at once, so that nothing in
// flight finishes and no shutdown checkpoint is written.
func (i *Instance) Kill() error {
	b, err := os.ReadFile(filepath.Join(i.dataDir, "postmaster.pid"))
	if err != nil {
		return fmt.Errorf("read postmaster.pid: %w", err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(strings.SplitN(string(b), "\n", 2)[0]))
	if err != nil {
		return fmt.Errorf("postmaster.pid: %w", err)
	}
	children := childrenOf(pid)
	if err := kill(pid); err != nil {
		return fmt.Errorf("kill postmaster %d: %w", pid, err)
	}
	for _, c := range children {
		_ = kill(c) // one may have exited already
	}
	i.Started = false
	return nil
}

// kill ends process pid at once (SIGKILL where there are signals).
func kill(pid int) error {
	p, err := os.FindProcess(pid)
	if err != nil {
		return err
	}
	return p.Kill()
}

// childrenOf lists the processes whose parent is pid, from /proc.
func childrenOf(pid int) []int {
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	var out []int
	for _, p := range stats {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		// The command name in parentheses may hold spaces; the fields
		// after its closing parenthesis are state, then the parent.
		fields := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
		if len(fields) < 2 || fields[1] != strconv.Itoa(pid) {
			continue
		}
		if child, err := strconv.Atoi(filepath.Base(filepath.Dir(p))); err == nil {
			out = append(out, child)
		}
	}
	return out
}

// Stop stops the cluster if this process started it.
func (i *Instance) Stop(ctx context.Context) error {
	if !i.Started {
		return nil
	}
	cmd := i.command(ctx, "pg_ctl", "-D", i.dataDir, "-m", "fast", "-w", "stop")
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("pg_ctl stop: %w: %s", err, oneLine(out))
	}
	i.Started = false
	return nil
}

const localURL = "postgres://postgres@localhost:5432/postgres?sslmode=disable"

// Find returns a usable server: the env URL, else localhost:5432, else a
// private cluster in DataDir (created and started as needed).
func Find(ctx context.Context, o Options) (*Instance, error) {
	logf := o.Logf
	if logf == nil {
		logf = func(string, ...any) {}
	}
	if o.EnvVar != "" {
		if u := os.Getenv(o.EnvVar); u != "" {
			if err := ping(ctx, u, 5*time.Second); err != nil {
				return nil, fmt.Errorf("%s does not answer: %w", o.EnvVar, err)
			}
			return &Instance{URL: u}, nil
		}
	}
	if !o.SkipLocalhost && ping(ctx, localURL, time.Second) == nil {
		logf("using PostgreSQL on localhost:5432")
		return &Instance{URL: localURL}, nil
	}
	if o.DataDir == "" {
		return nil, notFound(o.EnvVar)
	}
	inst, err := startPrivate(ctx, o, logf)
	switch {
	case errors.Is(err, ErrNotFound):
		return nil, notFound(o.EnvVar)
	case err != nil:
		return nil, fmt.Errorf("start a private PostgreSQL: %w", err)
	}
	return inst, nil
}

func ping(ctx context.Context, url string, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	return conn.Ping(ctx)
}

// binDir finds initdb and pg_ctl: PATH, pg_config --bindir, then the newest
// /usr/lib/postgresql/*/bin.
func binDir() (string, error) {
	if p, err := exec.LookPath("initdb"); err == nil {
		if _, err := exec.LookPath("pg_ctl"); err == nil {
			// A link on PATH (as /usr/local/bin/initdb often is) leads to
			// the directory that holds the other programs too
			// (pg_basebackup).
			if real, err := filepath.EvalSymlinks(p); err == nil {
				p = real
			}
			return filepath.Dir(p), nil
		}
	}
	if out, err := exec.Command("pg_config", "--bindir").Output(); err == nil {
		dir := strings.TrimSpace(string(out))
		if _, err := os.Stat(filepath.Join(dir, "initdb")); err == nil {
			return dir, nil
		}
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(dirs, func(i, j int) bool { return versionOf(dirs[i]) > versionOf(dirs[j]) })
	for _, d := range dirs {
		if _, err := os.Stat(filepath.Join(d, "initdb")); err == nil {
			return d, nil
		}
	}
	return "", ErrNotFound
}

func versionOf(dir string) int {
	n, _ := strconv.Atoi(filepath.Base(filepath.Dir(dir)))
	return n
}

func (i *Instance) command(ctx context.Context, name string, args ...string) *exec.Cmd {
	full := filepath.Join(i.bin, name)
	if len(i.runAs) > 0 {
		return exec.CommandContext(ctx, i.runAs[0], append(append(i.runAs[1:], full), args...)...)
	}
	return exec.CommandContext(ctx, full, args...)
}

// runAsPostgres returns the prefix that runs a command as the postgres user
// when we are root: initdb and postgres refuse to run as root.
func runAsPostgres(dataDir string) ([]string, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		return nil, fmt.Errorf("running as root needs a 'postgres' user to own the private cluster: %w", err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	if err := chownAll(dataDir, uid, gid); err != nil {
		return nil, err
	}
	if p, err := exec.LookPath("runuser"); err == nil {
		return []string{p, "-u", "postgres", "--"}, nil
	}
	if p, err := exec.LookPath("setpriv"); err == nil {
		return []string{p, "--reuid=" + u.Uid, "--regid=" + u.Gid, "--clear-groups"}, nil
	}
	return nil, errors.New("running as root needs runuser or setpriv to start PostgreSQL as 'postgres'")
}

func chownAll(dir string, uid, gid int) error {
	// The data directory's parents must be traversable by postgres.
	for p := dir; p != "/" && p != "."; p = filepath.Dir(p) {
		if st, err := os.Stat(p); err == nil && st.Mode().Perm()&0o001 == 0 && p != dir {
			_ = os.Chmod(p, st.Mode().Perm()|0o011)
		}
	}
	return filepath.Walk(dir, func(path string, _ os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(path, uid, gid)
	})
}

func startPrivate(ctx context.Context, o Options, logf func(string, ...any)) (*Instance, error) {
	bin, err := binDir()
	if err != nil {
		return nil, err
	}
	dataDir, err := filepath.Abs(o.DataDir)
	if err != nil {
		return nil, fmt.Errorf("resolve %s: %w", o.DataDir, err)
	}
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		return nil, fmt.Errorf("create %s: %w", dataDir, err)
	}
	inst := &Instance{Started: true, dataDir: filepath.Join(dataDir, "data"), bin: bin}
	sockDir := filepath.Join(dataDir, "sock")
	if err := os.MkdirAll(sockDir, 0o700); err != nil {
		return nil, fmt.Errorf("create %s: %w", sockDir, err)
	}
	if inst.runAs, err = runAsPostgres(dataDir); err != nil {
		return nil, err
	}
	if _, err := os.Stat(filepath.Join(inst.dataDir, "PG_VERSION")); err != nil {
		logf("initializing a private PostgreSQL cluster in %s", inst.dataDir)
		cmd := inst.command(ctx, "initdb", "-D", inst.dataDir, "-A", "trust", "-U", "postgres", "-E", "UTF8", "--no-sync")
		if out, err := cmd.CombinedOutput(); err != nil {
			// A half-made data directory would make every later initdb fail.
			_ = os.RemoveAll(inst.dataDir)
			return nil, fmt.Errorf("initdb in %s: %w: %s", inst.dataDir, err, oneLine(out))
		}
	}
	if url, ok := runningURL(ctx, inst.dataDir); ok {
		inst.Started = false
		inst.URL = url
		return inst, nil
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	// A Unix socket path is limited to 107 bytes and postgres refuses to
	// start past it; we connect over TCP, so a deep DataDir goes without one.
	if len(sockDir)+len("/.s.PGSQL.65535.lock") > 107 {
		sockDir = ""
	}
	opts := fmt.Sprintf("-p %d -k '%s' -c listen_addresses=127.0.0.1 -c max_connections=300", port, sockDir)
	if o.Fast {
		opts += " -c fsync=off -c synchronous_commit=off -c full_page_writes=off"
	}
	for _, setting := range o.Settings {
		opts += " -c " + setting
	}
	logFile := filepath.Join(dataDir, "postgres.log")
	cmd := inst.command(ctx, "pg_ctl", "-D", inst.dataDir, "-o", opts, "-l", logFile, "-w", "-t", "60", "start")
	if out, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("pg_ctl start in %s: %w: %s (log: %s)", inst.dataDir, err, oneLine(out), logFile)
	}
	inst.URL = fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", port)
	if err := ping(ctx, inst.URL, 10*time.Second); err != nil {
		return nil, fmt.Errorf("private PostgreSQL does not answer: %w", err)
	}
	logf("started a private PostgreSQL on 127.0.0.1:%d", port)
	return inst, nil
}

// runningURL finds a cluster already running in dataDir (left by another
// process), from its postmaster.pid.
func runningURL(ctx context.Context, dataDir string) (string, bool) {
	b, err := os.ReadFile(filepath.Join(dataDir, "postmaster.pid"))
	if err != nil {
		return "", false
	}
	lines := strings.Split(string(b), "\n")
	if len(lines) < 4 {
		return "", false
	}
	url := fmt.Sprintf("postgres://postgres@127.0.0.1:%s/postgres?sslmode=disable", strings.TrimSpace(lines[3]))
	if ping(ctx, url, 2*time.Second) != nil {
		return "", false
	}
	return url, true
}

// oneLine flattens a command's output so that errors stay one line.
func oneLine(out []byte) string {
	return strings.Join(strings.Fields(string(out)), " ")
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("find a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// EnsureDatabase creates database name on the server if it is missing.
func EnsureDatabase(ctx context.Context, adminURL, name string) error {
	conn, err := pgx.Connect(ctx, adminURL)
	if err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	defer conn.Close(context.Background())
	var exists bool
	if err := conn.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)`, name).Scan(&exists); err != nil {
		return fmt.Errorf("look up database %s: %w", name, err)
	}
	if exists {
		return nil
	}
	if _, err := conn.Exec(ctx, `CREATE DATABASE `+pgx.Identifier{name}.Sanitize()); err != nil {
		return fmt.Errorf("create database %s: %w", name, err)
	}
	return nil
}

// DropDatabase drops the database name on the server at adminURL, if it
// exists, ending its sessions.
func DropDatabase(ctx context.Context, adminURL, name string) error {
	conn, err := pgx.Connect(ctx, adminURL)
	if err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, `DROP DATABASE IF EXISTS `+pgx.Identifier{name}.Sanitize()+` WITH (FORCE)`); err != nil {
		return fmt.Errorf("drop database %s: %w", name, err)
	}
	return nil
}
