// Command orderd-bench is orderd's load generator: it starts `orderd serve`
// processes on a fresh database (or loads a running orderd), runs the
// scenarios and their same-run baselines and judges the goals. It is a
// binary of its own so that the server links none of its scenarios, charts
// or progress bars; `orderd bench` runs the orderd-bench beside it.
package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime/debug"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/orderd/orderd/auth"
	"github.com/orderd/orderd/internal/app"
	"github.com/orderd/orderd/internal/bench"
	"github.com/orderd/orderd/internal/cliflags"
	"github.com/orderd/orderd/internal/pglocal"
	"github.com/orderd/orderd/migrations"
)

// generatorGCPercent is the load generator's collector target unless GOGC
// says otherwise, as orderd's commands have: it allocates per request while
// its live heap stays small, and its CPU is counted in every figure.
const generatorGCPercent = 200

func main() {
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(generatorGCPercent)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	err := benchCommand(ctx, os.Args[1:], os.Stdout)
	stop()
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
	default:
		fmt.Fprintln(os.Stderr, "orderd-bench:", err)
		os.Exit(1)
	}
}

// orderdBinary is the orderd whose servers the bench starts and whose audit
// it runs: the one --orderd names, else the one beside this binary (as `go
// install ./cmd/...` lays them out), else one built from the module the
// bench runs in (`go run ./cmd/orderd-bench` in a checkout) into a
// temporary directory that cleanup removes.
func orderdBinary(ctx context.Context, given string) (path string, cleanup func(), err error) {
	if given != "" {
		if _, err := os.Stat(given); err != nil {
			return "", nil, fmt.Errorf("--orderd: %w", err)
		}
		return given, func() {}, nil
	}
	if exe, err := os.Executable(); err == nil {
		beside := filepath.Join(filepath.Dir(exe), "orderd")
		if _, err := os.Stat(beside); err == nil {
			return beside, func() {}, nil
		}
	}
	dir, err := os.MkdirTemp("", "orderd-bench-bin")
	if err != nil {
		return "", nil, err
	}
	cleanup = func() { os.RemoveAll(dir) }
	path = filepath.Join(dir, "orderd")
	if out, err := exec.CommandContext(ctx, "go", "build", "-o", path, "github.com/orderd/orderd/cmd/orderd").CombinedOutput(); err != nil {
		cleanup()
		return "", nil, fmt.Errorf("no orderd beside this binary, and building one failed (%w: %s): give one with --orderd", err, strings.TrimSpace(string(out)))
	}
	return path, cleanup, nil
}

func benchCommand(ctx context.Context, args []string, stdout io.Writer) error {
	def := app.DefaultConfig()
	fs := flag.NewFlagSet("orderd-bench", flag.ContinueOnError)
	orderd := fs.String("orderd", "", "the orderd binary whose servers the bench starts and whose audit it runs (default: the one beside orderd-bench, else one built from the module of the working directory)")
	url := fs.String("url", "", "a running orderd to load (default: start `orderd serve` as a process of its own)")
	dbURL, secret := new(string), new(string)
	fs.Var(cliflags.SecretValue{P: dbURL}, "database-url", "with --url, that orderd's database, for baselines and invariant checks; else a migrated database to run on (default: a fresh one on a private cluster; never shown)")
	cliflags.Secret(fs, secret, "jwt-secret", "ORDERD_JWT_SECRET", "that orderd's JWT secret, with --url")
	cfg := def
	// The bench's tokens carry what the server requires: the started
	// server is given these, a running one (--url) must have the same.
	cliflags.JWTClaims(fs, &cfg.JWTIssuer, &cfg.JWTAudience)
	opsURL := fs.String("ops-url", "http://127.0.0.1:9090", "that orderd's operator listener, where the ws and memory scenarios read /metrics, with --url")
	serverPID := fs.Int("server-pid", 0, "that orderd's process id, with --url, for its CPU per order")
	inProcess := fs.Bool("in-process", false, "quick mode: run the server inside the load generator's process")
	ratePerCustomer := fs.Float64("rate-per-customer", def.RatePerCustomer, "the started server's placements per second per customer (0 = off)")
	ratePerIP := fs.Float64("rate-per-ip", def.RatePerIP, "the started server's requests per second per client address (0 = off)")
	clients := fs.Int("clients", 0, "concurrent HTTP clients (0 = the scenario's default)")
	count := fs.Int("count", 0, "orders, buyers or drop entries (0 = the scenario's default)")
	duration := fs.Duration("duration", 0, "run time of time-boxed scenarios (0 = default)")
	ledgerEvents := fs.Int("ledger-events", 0, "events the ledger scenario grows the log to; its goals are judged at 1,000,000 only (0 = 1,000,000)")
	baselineStep := fs.Duration("baseline-step", 0, "run time of each connection count of a baseline's sweep (0 = 2s)")
	seed := fs.Uint64("seed", 1, "random seed")
	jsonPath := fs.String("json", "", "write every figure to this JSON file")
	chartPath := fs.String("chart", "", "write throughput, latency and queue depth charts to this HTML file")
	mdPath := fs.String("markdown", "", "write the summary as a Markdown page (docs/performance.md) to this file")
	readmePath := fs.String("readme", "", "replace the figures block of this README (README.md) with the run's headline table; with --citus-url, its cluster figures block with the per-node tables and projections")
	quiet := fs.Bool("quiet", false, "no progress bars")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of the bench process (the load generator, and the server with --in-process) to this file")
	citusURL := fs.String("citus-url", "", "also run every scenario on a fresh database of this Citus cluster (its coordinator, any database on it), after the same scenario on one PostgreSQL, and compare their CPU per order node by node")
	citusShards := fs.Int("citus-shards", 0, fmt.Sprintf("with --citus-url, the shard count of the cluster database's tables (0 = orderd migrate citus's default: %d for each worker)", migrations.ShardsPerWorker))
	compare := fs.Bool("compare", false, "compare two --json files: orderd-bench --compare OLD.json NEW.json")
	wsWatchers := fs.Bool("ws-watchers", false, "run the ws scenario's websocket clients described on standard input (the scenario starts such processes itself)")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: orderd-bench [flags] %s|all (or several, comma-separated)\n       orderd-bench --compare OLD.json NEW.json\n", strings.Join(bench.Scenarios, "|"))
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *wsWatchers {
		return bench.RunWatchers(ctx, os.Stdin, stdout)
	}
	if *compare {
		if fs.NArg() != 2 {
			fs.Usage()
			return errors.New("--compare takes two JSON files")
		}
		return compareReports(stdout, fs.Arg(0), fs.Arg(1))
	}
	if fs.NArg() != 1 {
		fs.Usage()
		return errors.New("one scenario is required")
	}
	names := strings.Split(fs.Arg(0), ",")
	if fs.Arg(0) == "all" {
		names = bench.Scenarios
	}
	for _, n := range names {
		if !slices.Contains(bench.Scenarios, n) {
			fs.Usage()
			return fmt.Errorf("unknown scenario %q", n)
		}
	}

	orderdBin, removeBuilt, err := orderdBinary(ctx, *orderd)
	if err != nil {
		return err
	}
	defer removeBuilt()
	cfg.RatePerCustomer, cfg.RatePerIP = *ratePerCustomer, *ratePerIP
	// The webhooks scenario's receiver listens on loopback, which a
	// default server refuses to call.
	cfg.WebhookAllowLoopback = true
	target, settings, stop, err := benchTarget(ctx, benchWhere{orderd: orderdBin, url: *url, opsURL: *opsURL, dbURL: *dbURL, secret: *secret, serverPID: *serverPID, inProcess: *inProcess}, cfg)
	if err != nil {
		return err
	}
	defer stop()
	if exe, err := os.Executable(); err == nil {
		target.WatcherCommand = func() *exec.Cmd {
			cmd := exec.Command(exe, "--ws-watchers")
			cmd.Stderr = os.Stderr
			return cmd
		}
	}
	var cluster *bench.ClusterRun
	var onCitus *bench.Target
	if *citusURL != "" {
		if *url != "" || *inProcess || *dbURL != "" {
			return errors.New("--citus-url starts its own servers: it takes neither --url, --in-process nor --database-url")
		}
		db, err := newClusterDatabase(ctx, *citusURL, *citusShards)
		if err != nil {
			return err
		}
		defer db.drop()
		ct, _, stopCitus, err := benchTarget(ctx, benchWhere{orderd: orderdBin, dbURL: db.url}, cfg)
		if err != nil {
			return err
		}
		defer stopCitus()
		ct.Nodes, ct.Citus = db.nodes, true
		ct.WatcherCommand = target.WatcherCommand
		onCitus = ct
		cluster = &bench.ClusterRun{Settings: bench.CitusSettings(ctx, ct), Scenarios: map[string]*bench.Result{}, Comparisons: map[string]*bench.Comparison{}}
		fmt.Fprintln(os.Stderr, "== idle, on one PostgreSQL and on Citus")
		idleOne, err := bench.Idle(ctx, target)
		if err != nil {
			return err
		}
		idleCitus, err := bench.Idle(ctx, ct)
		if err != nil {
			return err
		}
		cluster.Idle = bench.CompareIdle(idleOne, idleCitus)
	}
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}

	opts := bench.Options{Clients: *clients, Count: *count, Duration: *duration, LedgerEvents: *ledgerEvents, BaselineStep: *baselineStep, Seed: *seed, Progress: !*quiet, Out: os.Stderr}
	settings.Bench = map[string]any{"clients": *clients, "count": *count, "duration": duration.String(), "ledger_events": *ledgerEvents, "baseline_step": baselineStep.String(), "seed": *seed}
	fs.Visit(func(f *flag.Flag) {
		switch f.Name {
		case "clients", "count", "duration", "ledger-events", "baseline-step", "seed", "rate-per-customer", "rate-per-ip":
			settings.NonDefault = append(settings.NonDefault, fmt.Sprintf("--%s=%s (given on the command line)", f.Name, f.Value))
		}
	})
	report := bench.Report{Machine: bench.Machine(), Settings: settings, Scenarios: map[string]*bench.Result{}, Citus: cluster}
	failed := false
	for _, name := range names {
		fmt.Fprintf(os.Stderr, "== %s\n", name)
		res, err := bench.Run(ctx, name, target, opts)
		if err != nil {
			if ctx.Err() != nil {
				return fmt.Errorf("bench %s: %w", name, err)
			}
			// One scenario that cannot finish does not cost the others'
			// figures: it is reported as broken and the run goes on.
			res = &bench.Result{Violations: []string{"the scenario failed: " + err.Error()}}
		}
		report.Scenarios[name] = res
		failed = failed || !res.InvariantsOK
		if onCitus != nil {
			fmt.Fprintf(os.Stderr, "== %s, on Citus\n", name)
			citusOpts := opts
			citusOpts.SkipBaselines = true
			watch := bench.WatchTwoPhase(onCitus)
			cres, err := bench.Run(ctx, name, onCitus, citusOpts)
			twoPC := watch.Stop()
			if err != nil {
				if ctx.Err() != nil {
					return fmt.Errorf("bench %s on Citus: %w", name, err)
				}
				cres = &bench.Result{Violations: []string{"the scenario failed: " + err.Error()}}
			}
			cluster.Scenarios[name] = cres
			if c := bench.CompareDeployments(res, cres, twoPC, bench.Cores()); c != nil {
				cluster.Comparisons[name] = c
			}
			failed = failed || !cres.InvariantsOK
		}
	}
	bench.JudgeAcross(report.Scenarios)
	printSummary(stdout, names, report)
	bench.PrintCluster(stdout, names, cluster)
	if *jsonPath != "" {
		b, err := json.MarshalIndent(report, "", "  ")
		if err != nil {
			return err
		}
		if err := os.WriteFile(*jsonPath, b, 0o644); err != nil {
			return fmt.Errorf("write %s: %w", *jsonPath, err)
		}
	}
	if *mdPath != "" {
		if err := os.WriteFile(*mdPath, []byte(bench.Markdown(names, report)), 0o644); err != nil {
			return fmt.Errorf("write %s: %w", *mdPath, err)
		}
	}
	if *readmePath != "" {
		readme, err := os.ReadFile(*readmePath)
		if err != nil {
			return err
		}
		// A run on a cluster writes the README's Scaling out block, and
		// leaves the headline figures to the runs of one PostgreSQL.
		write := bench.ReadmeFigures
		if report.Citus != nil {
			write = bench.ReadmeCluster
		}
		updated, err := write(string(readme), names, report)
		if err != nil {
			return fmt.Errorf("%s: %w", *readmePath, err)
		}
		if err := os.WriteFile(*readmePath, []byte(updated), 0o644); err != nil {
			return fmt.Errorf("write %s: %w", *readmePath, err)
		}
	}
	if *chartPath != "" {
		if err := bench.WriteChart(*chartPath, names, report); err != nil {
			return err
		}
	}
	if failed {
		return errors.New("an invariant was broken: see the violations above")
	}
	return nil
}

// benchWhere says which server the bench loads.
type benchWhere struct {
	orderd                     string // the binary that serves and audits
	url, opsURL, dbURL, secret string
	serverPID                  int
	inProcess                  bool
}

// serverSettings is the part of cfg a run's figures depend on, and what of
// it differs from the defaults.
func serverSettings(cfg app.Config) (map[string]any, []string) {
	def := app.DefaultConfig()
	all := map[string]any{
		"rate_per_customer": cfg.RatePerCustomer, "rate_per_ip": cfg.RatePerIP, "max_conns": cfg.MaxConns,
		"request_timeout": cfg.RequestTimeout.String(), "statement_timeout": cfg.StatementTimeout.String(),
		"webhook_allow_loopback": cfg.WebhookAllowLoopback, "webhook_timeout": cfg.WebhookTimeout.String(),
		"webhook_max_attempts": cfg.WebhookMaxAttempts, "gogc": cmp.Or(os.Getenv("GOGC"), "400 (orderd serve's default)"),
	}
	var nonDefault []string
	if cfg.RatePerCustomer != def.RatePerCustomer {
		nonDefault = append(nonDefault, fmt.Sprintf("server rate_per_customer=%g (default %g)", cfg.RatePerCustomer, def.RatePerCustomer))
	}
	if cfg.RatePerIP != def.RatePerIP {
		nonDefault = append(nonDefault, fmt.Sprintf("server rate_per_ip=%g (default %g)", cfg.RatePerIP, def.RatePerIP))
	}
	if cfg.WebhookAllowLoopback != def.WebhookAllowLoopback {
		nonDefault = append(nonDefault, "server webhook_allow_loopback=true (the webhooks scenario's receiver listens on loopback)")
	}
	if v := os.Getenv("GOGC"); v != "" {
		nonDefault = append(nonDefault, "GOGC="+v+" (from the environment)")
	}
	return all, nonDefault
}

// benchTarget points at a running orderd, or starts one on a fresh database
// of a private PostgreSQL cluster: `orderd serve` as a process of its own
// by default, or inside this process in the quick mode.
func benchTarget(ctx context.Context, w benchWhere, cfg app.Config) (*bench.Target, bench.Settings, func(), error) {
	if w.url != "" {
		if w.dbURL == "" || w.secret == "" {
			return nil, bench.Settings{}, nil, errors.New("--url needs --database-url and the JWT secret (--jwt-secret or ORDERD_JWT_SECRET)")
		}
		pool, err := app.NewPool(ctx, w.dbURL, 10, 0)
		if err != nil {
			return nil, bench.Settings{}, nil, err
		}
		t := bench.NewTarget(strings.TrimRight(w.url, "/"), pool, benchAuth(w.secret, cfg))
		t.OpsURL = strings.TrimRight(w.opsURL, "/")
		settings := bench.Settings{Mode: "url", Server: map[string]any{"url": w.url},
			NonDefault: []string{"the server's settings are its own: this bench did not start it"}}
		if w.serverPID > 0 {
			t.ServerPIDs = func() []int { return []int{w.serverPID} }
			t.RSS = func() int64 { return bench.RSS(w.serverPID) }
		}
		t.AuditCommand = auditCommandOn(w.orderd, w.dbURL)
		return t, settings, pool.Close, nil
	}
	var nonDefault []string
	stopPG := func() {}
	if w.dbURL != "" {
		cfg.DatabaseURL = w.dbURL
		nonDefault = append(nonDefault, "the database given by --database-url, not a fresh one on the bench's own cluster")
	} else {
		// A private cluster: baselines open up to 64 connections besides
		// the server's. Commit timestamps let the ws scenario time updates
		// from the commit that caused them.
		inst, err := pglocal.Find(ctx, pglocal.Options{DataDir: ".orderd/bench-pg", EnvVar: "DATABASE_URL", SkipLocalhost: true,
			Settings: []string{"track_commit_timestamp=on"}})
		if err != nil {
			return nil, bench.Settings{}, nil, err
		}
		// Each run's database is dropped when the run is done with it: a
		// run leaves gigabytes, and the autovacuum of those left behind
		// would run during later runs.
		name := fmt.Sprintf("orderd_bench_%d", time.Now().Unix())
		stopPG = func() {
			if err := pglocal.DropDatabase(context.Background(), inst.URL, name); err != nil {
				fmt.Fprintln(os.Stderr, "drop the run's database:", err)
			}
			if err := inst.Stop(context.Background()); err != nil {
				fmt.Fprintln(os.Stderr, "stop PostgreSQL:", err)
			}
		}
		if err := pglocal.EnsureDatabase(ctx, inst.URL, name); err != nil {
			stopPG()
			return nil, bench.Settings{}, nil, err
		}
		cfg.DatabaseURL = inst.DatabaseURL(name)
		nonDefault = append(nonDefault, "PostgreSQL track_commit_timestamp=on (the ws scenario times updates from their commit)")
	}
	secret, err := app.NewJWTSecret()
	if err != nil {
		stopPG()
		return nil, bench.Settings{}, nil, err
	}
	cfg.JWTSecret = secret
	cfg.Addr, cfg.OpsAddr = "127.0.0.1:0", "127.0.0.1:0"
	cfg.Logger = slog.New(slog.NewJSONHandler(io.Discard, nil))
	server, serverNonDefault := serverSettings(cfg)
	settings := bench.Settings{Mode: "separate processes", Server: server, NonDefault: append(serverNonDefault, nonDefault...)}
	spawn := func(ctx context.Context) (*bench.Instance, error) { return spawnServe(ctx, w.orderd, cfg) }
	spawnUntimed := func(ctx context.Context) (*bench.Instance, error) {
		return spawnServe(ctx, w.orderd, cfg, app.BenchWithoutTimersEnv+"=true")
	}

	var t *bench.Target
	var stopServer func()
	if w.inProcess {
		settings.Mode = "in-process"
		settings.NonDefault = append(settings.NonDefault, "in-process: the server runs inside the load generator's process")
		a, err := app.New(ctx, cfg)
		if err != nil {
			stopPG()
			return nil, bench.Settings{}, nil, err
		}
		if err := a.Listen(); err != nil {
			stopPG()
			return nil, bench.Settings{}, nil, err
		}
		runCtx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- a.Run(runCtx) }()
		stopServer = func() { cancel(); <-done }
		t = bench.NewTarget("http://"+a.Addr(), nil, benchAuth(cfg.JWTSecret, cfg))
		t.OpsURL = "http://" + a.OpsAddr()
		t.InProcess = true
		t.RSS = func() int64 { return bench.RSS(os.Getpid()) }
	} else {
		server, err := spawn(ctx)
		if err != nil {
			stopPG()
			return nil, bench.Settings{}, nil, err
		}
		stopServer = server.Stop
		t = bench.NewTarget(server.BaseURL, nil, benchAuth(cfg.JWTSecret, cfg))
		t.OpsURL = server.OpsURL
		t.ServerPIDs = func() []int { return []int{server.PID} }
		t.RSS = func() int64 { return bench.RSS(server.PID) }
	}
	pool, err := app.NewPool(ctx, cfg.DatabaseURL, 10, 0)
	if err != nil {
		stopServer()
		stopPG()
		return nil, bench.Settings{}, nil, err
	}
	t.Pool = pool
	t.AuditCommand = auditCommandOn(w.orderd, cfg.DatabaseURL)
	t.Spawn = spawn
	t.SpawnUntimed = spawnUntimed
	stop := func() {
		stopServer()
		pool.Close()
		stopPG()
	}
	return t, settings, stop, nil
}

// auditCommandOn runs `orderd audit` on a database.
func auditCommandOn(orderd, databaseURL string) func(ctx context.Context) *exec.Cmd {
	return func(ctx context.Context) *exec.Cmd {
		cmd := exec.CommandContext(ctx, orderd, "audit")
		cmd.Env = append(os.Environ(), "DATABASE_URL="+databaseURL)
		return cmd
	}
}

func printSummary(w io.Writer, names []string, r bench.Report) {
	fmt.Fprintf(w, "mode: %s\n", r.Settings.Mode)
	for _, s := range r.Settings.NonDefault {
		fmt.Fprintf(w, "not default: %s\n", s)
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "scenario\torderd/s\tbest baseline/s\tat conns\ton orderd's tables/s\tratio\tgoal\tmet\tp50 ms\tp99 ms\tinvariants\t")
	for _, n := range names {
		res := r.Scenarios[n]
		ok := "ok"
		if !res.InvariantsOK {
			ok = "BROKEN"
		}
		own := "-"
		for _, b := range res.Baselines {
			if b.Name == "orderd_tables" {
				own = fmt.Sprintf("%.0f", b.BestPerS)
			}
		}
		conns := "-"
		if res.BaselineConns > 0 {
			conns = fmt.Sprint(res.BaselineConns)
		}
		fmt.Fprintf(tw, "%s\t%.0f\t%.0f\t%s\t%s\t%.2f\t%s\t%s\t%.1f\t%.1f\t%s\t\n", n, res.PerS, res.BaselinePerS, conns, own, res.Ratio, res.GoalStated(), res.Met(), res.P50ms, res.P99ms, ok)
	}
	_ = tw.Flush()
	for _, n := range names {
		res := r.Scenarios[n]
		if len(res.Extra) > 0 {
			b, _ := json.Marshal(res.Extra)
			fmt.Fprintf(w, "%s: %s\n", n, b)
		}
		for _, b := range res.Baselines {
			fmt.Fprintf(w, "%s baseline %s (%s):", n, b.Name, b.Statements)
			for _, p := range b.Sweep {
				fmt.Fprintf(w, " %d conns %.0f/s;", p.Conns, p.PerS)
			}
			fmt.Fprintf(w, " best %.0f/s at %d\n", b.BestPerS, b.BestConns)
		}
		for _, v := range res.Violations {
			fmt.Fprintf(w, "%s VIOLATION: %s\n", n, v)
		}
	}
}

// benchAuth signs the bench's tokens with the secret and the issuer and
// audience the server requires.
func benchAuth(secret string, cfg app.Config) *auth.Authenticator {
	return auth.NewWith(auth.Options{Secret: []byte(secret), Issuer: cfg.JWTIssuer, Audience: cfg.JWTAudience})
}

// spawnServe starts another `orderd serve` process of the orderd binary on
// cfg's database, for scenarios that measure a server apart from the load
// generator or run several instances.
func spawnServe(ctx context.Context, orderd string, cfg app.Config, env ...string) (*bench.Instance, error) {
	// The server's log goes to a file, where the kernel writes it without
	// the load generator's CPU, and says which ports it bound: ports picked
	// here and bound there could be taken in between by anyone else on the
	// machine.
	logFile, err := os.CreateTemp("", "orderd-serve-*.log")
	if err != nil {
		return nil, err
	}
	removeLog := func() { logFile.Close(); os.Remove(logFile.Name()) }
	cmd := exec.Command(orderd, "serve", "--addr", "127.0.0.1:0", "--ops-addr", "127.0.0.1:0",
		"--rate-per-customer", strconv.FormatFloat(cfg.RatePerCustomer, 'g', -1, 64), "--rate-per-ip", strconv.FormatFloat(cfg.RatePerIP, 'g', -1, 64),
		"--webhook-allow-loopback="+strconv.FormatBool(cfg.WebhookAllowLoopback))
	cmd.Env = append(append(os.Environ(), "DATABASE_URL="+cfg.DatabaseURL, "ORDERD_JWT_SECRET="+cfg.JWTSecret,
		"ORDERD_JWT_ISSUER="+cfg.JWTIssuer, "ORDERD_JWT_AUDIENCE="+cfg.JWTAudience, "ORDERD_LOG_FORMAT=json"), env...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		removeLog()
		return nil, fmt.Errorf("start orderd serve: %w", err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	kill := func() {
		_ = cmd.Process.Kill()
		<-exited
		removeLog()
	}
	stop := func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
		removeLog()
	}
	var base, opsBase string
	deadline := time.Now().Add(30 * time.Second)
	for {
		if base == "" {
			if addr, opsAddr, ok := servingAddrs(logFile.Name()); ok {
				base, opsBase = "http://"+addr, "http://"+opsAddr
			}
		}
		if base != "" {
			req, _ := http.NewRequestWithContext(ctx, "GET", base+"/readyz", nil)
			if resp, err := http.DefaultClient.Do(req); err == nil {
				resp.Body.Close()
				if resp.StatusCode == http.StatusOK {
					return &bench.Instance{BaseURL: base, OpsURL: opsBase, PID: cmd.Process.Pid, Stop: stop, Kill: kill, Ready: time.Now()}, nil
				}
			}
		}
		select {
		case <-exited:
			last := lastLines(logFile.Name(), 3)
			removeLog()
			return nil, fmt.Errorf("orderd serve exited before it was ready: %s", last)
		case <-ctx.Done():
			stop()
			return nil, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			last := lastLines(logFile.Name(), 3)
			stop()
			return nil, fmt.Errorf("orderd serve was not ready within 30 s: %s", last)
		}
	}
}

// servingAddrs reads the addresses a server bound from its log's "orderd
// serving" line, once it has written it.
func servingAddrs(logPath string) (addr, opsAddr string, ok bool) {
	raw, err := os.ReadFile(logPath)
	if err != nil {
		return "", "", false
	}
	return app.ServingAddrs(string(raw))
}

// lastLines is the end of a server's log, which says why it stopped.
func lastLines(logPath string, n int) string {
	raw, err := os.ReadFile(logPath)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimSpace(string(raw)), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	if len(lines) == 1 && lines[0] == "" {
		return "it wrote nothing"
	}
	return strings.Join(lines, " | ")
}

func compareReports(w io.Writer, oldPath, newPath string) error {
	old, err := bench.ReadReport(oldPath)
	if err != nil {
		return err
	}
	cur, err := bench.ReadReport(newPath)
	if err != nil {
		return err
	}
	bench.Compare(w, old, cur)
	return nil
}
