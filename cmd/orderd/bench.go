package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"runtime/pprof"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/orderd/orderd/auth"
	"github.com/orderd/orderd/internal/app"
	"github.com/orderd/orderd/internal/bench"
	"github.com/orderd/orderd/internal/pglocal"
)

func benchCommand(ctx context.Context, args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	url := fs.String("url", "", "a running orderd to load (default: start one in this process)")
	dbURL := fs.String("database-url", "", "that orderd's database, for baselines and invariant checks")
	secret := fs.String("jwt-secret", os.Getenv("ORDERD_JWT_SECRET"), "that orderd's JWT secret, with --url")
	clients := fs.Int("clients", 0, "concurrent HTTP clients (0 = the scenario's default)")
	count := fs.Int("count", 0, "orders or buyers (0 = the scenario's default)")
	duration := fs.Duration("duration", 0, "run time of time-boxed scenarios (0 = default)")
	seed := fs.Uint64("seed", 1, "random seed")
	jsonPath := fs.String("json", "", "write every figure to this JSON file")
	chartPath := fs.String("chart", "", "write throughput, latency and queue depth charts to this HTML file")
	mdPath := fs.String("markdown", "", "write the summary as a Markdown table (the README's performance section) to this file")
	quiet := fs.Bool("quiet", false, "no progress bars")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of the whole run (client and in-process server) to this file")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: orderd bench [flags] %s|all\n", strings.Join(bench.Scenarios, "|"))
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		fs.Usage()
		return errors.New("one scenario is required")
	}
	names := []string{fs.Arg(0)}
	if names[0] == "all" {
		names = bench.Scenarios
	}

	target, stop, err := benchTarget(ctx, *url, *dbURL, *secret)
	if err != nil {
		return err
	}
	defer stop()
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

	report := bench.Report{Machine: bench.Machine(), Scenarios: map[string]*bench.Result{}}
	opts := bench.Options{Clients: *clients, Count: *count, Duration: *duration, Seed: *seed, Progress: !*quiet, Out: os.Stderr}
	failed := false
	for _, name := range names {
		fmt.Fprintf(os.Stderr, "== %s\n", name)
		res, err := bench.Run(ctx, name, target, opts)
		if err != nil {
			return fmt.Errorf("bench %s: %w", name, err)
		}
		report.Scenarios[name] = res
		failed = failed || !res.InvariantsOK
	}
	printSummary(stdout, names, report)
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

// benchTarget points at a running orderd or starts one in this process on a
// fresh database of a local PostgreSQL.
func benchTarget(ctx context.Context, url, dbURL, secret string) (*bench.Target, func(), error) {
	if url != "" {
		if dbURL == "" || secret == "" {
			return nil, nil, errors.New("--url needs --database-url and the JWT secret (--jwt-secret or ORDERD_JWT_SECRET)")
		}
		pool, err := app.NewPool(ctx, dbURL, 10, 0)
		if err != nil {
			return nil, nil, err
		}
		return bench.NewTarget(strings.TrimRight(url, "/"), pool, auth.New([]byte(secret), nil)), pool.Close, nil
	}
	// A private cluster by default: baselines open as many connections as
	// there are clients (up to 256), more than a stock server allows.
	// Commit timestamps let the ws scenario time updates from the commit
	// that caused them.
	inst, err := pglocal.Find(ctx, pglocal.Options{DataDir: ".orderd/bench-pg", EnvVar: "DATABASE_URL", SkipLocalhost: true,
		Settings: []string{"track_commit_timestamp=on"}})
	if err != nil {
		return nil, nil, err
	}
	name := fmt.Sprintf("orderd_bench_%d", time.Now().Unix())
	if err := pglocal.EnsureDatabase(ctx, inst.URL, name); err != nil {
		return nil, nil, err
	}
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	cfg := app.DefaultConfig()
	cfg.DatabaseURL = inst.DatabaseURL(name)
	cfg.JWTSecret = hex.EncodeToString(b)
	cfg.Addr = "127.0.0.1:0"
	cfg.RatePerCustomer = 0
	cfg.WebhookAllowLoopback = true
	cfg.Logger = slog.New(slog.NewJSONHandler(io.Discard, nil))
	a, err := app.New(ctx, cfg)
	if err != nil {
		return nil, nil, err
	}
	if err := a.Listen(); err != nil {
		return nil, nil, err
	}
	runCtx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(runCtx) }()
	pool, err := app.NewPool(ctx, cfg.DatabaseURL, 10, 0)
	if err != nil {
		cancel()
		return nil, nil, err
	}
	t := bench.NewTarget("http://"+a.Addr(), pool, auth.New([]byte(cfg.JWTSecret), nil))
	t.RSS = bench.SelfRSS
	t.Spawn = func(ctx context.Context) (*bench.Instance, error) { return spawnServe(ctx, cfg) }
	stop := func() {
		cancel()
		<-done
		pool.Close()
		if err := inst.Stop(context.Background()); err != nil {
			fmt.Fprintln(os.Stderr, "stop PostgreSQL:", err)
		}
	}
	return t, stop, nil
}

func printSummary(w io.Writer, names []string, r bench.Report) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "scenario\torderd/s\tbaseline/s\tratio\tgoal\tp50 ms\tp99 ms\tinvariants\t")
	for _, n := range names {
		res := r.Scenarios[n]
		ok := "ok"
		if !res.InvariantsOK {
			ok = "BROKEN"
		}
		fmt.Fprintf(tw, "%s\t%.0f\t%.0f\t%.2f\t%.1f\t%.1f\t%.1f\t%s\t\n", n, res.PerS, res.BaselinePerS, res.Ratio, res.Goal, res.P50ms, res.P99ms, ok)
	}
	_ = tw.Flush()
	for _, n := range names {
		res := r.Scenarios[n]
		if len(res.Extra) > 0 {
			b, _ := json.Marshal(res.Extra)
			fmt.Fprintf(w, "%s: %s\n", n, b)
		}
		for _, v := range res.Violations {
			fmt.Fprintf(w, "%s VIOLATION: %s\n", n, v)
		}
	}
}

// spawnServe starts another `orderd serve` process on cfg's database, for
// scenarios that measure a server apart from the load generator or run
// several instances.
func spawnServe(ctx context.Context, cfg app.Config) (*bench.Instance, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("find own binary: %w", err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	addr := l.Addr().String()
	_ = l.Close()
	cmd := exec.Command(exe, "serve", "--addr", addr, "--rate-per-customer", "0", "--rate-per-ip", "0")
	cmd.Env = append(os.Environ(), "DATABASE_URL="+cfg.DatabaseURL, "ORDERD_JWT_SECRET="+cfg.JWTSecret)
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start orderd serve: %w", err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	stop := func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
	}
	base := "http://" + addr
	deadline := time.Now().Add(30 * time.Second)
	for {
		req, _ := http.NewRequestWithContext(ctx, "GET", base+"/readyz", nil)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return &bench.Instance{BaseURL: base, Stop: stop}, nil
			}
		}
		select {
		case <-exited:
			return nil, errors.New("orderd serve exited before it was ready")
		case <-ctx.Done():
			stop()
			return nil, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			stop()
			return nil, errors.New("orderd serve was not ready within 30 s")
		}
	}
}
