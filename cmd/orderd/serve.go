package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/orderd/orderd/internal/app"
	"github.com/orderd/orderd/internal/cliflags"
	"github.com/orderd/orderd/store"
)

// configFlags binds every setting to a flag whose default comes from the
// environment, so either way of configuring works.
func configFlags(fs *flag.FlagSet, cfg *app.Config) {
	cliflags.Secret(fs, &cfg.DatabaseURL, "database-url", "DATABASE_URL", "PostgreSQL connection string")
	fs.StringVar(&cfg.Addr, "addr", envString("ORDERD_ADDR", cfg.Addr), "listen address (ORDERD_ADDR)")
	cliflags.Secret(fs, &cfg.JWTSecret, "jwt-secret", "ORDERD_JWT_SECRET", "HS256 secret for bearer tokens, at least 32 bytes")
	cliflags.JWTClaims(fs, &cfg.JWTIssuer, &cfg.JWTAudience)
	fs.StringVar(&cfg.OpsAddr, "ops-addr", envString("ORDERD_OPS_ADDR", cfg.OpsAddr), "operator listener for /metrics, /riverui/ and /debug/pprof/ (ORDERD_OPS_ADDR)")
	fs.StringVar(&cfg.OpsUser, "ops-user", envString("ORDERD_OPS_USER", cfg.OpsUser), "basic auth user of the operator listener (ORDERD_OPS_USER)")
	cliflags.Secret(fs, &cfg.OpsPassword, "ops-password", "ORDERD_OPS_PASSWORD", "basic auth password of the operator listener; required off loopback")
	fs.IntVar(&cfg.WebhookMaxAttempts, "webhook-max-attempts", envInt("ORDERD_WEBHOOK_MAX_ATTEMPTS", cfg.WebhookMaxAttempts), "delivery attempts before a webhook is dead-lettered (ORDERD_WEBHOOK_MAX_ATTEMPTS)")
	fs.DurationVar(&cfg.WebhookBackoff, "webhook-backoff", envDuration("ORDERD_WEBHOOK_BACKOFF", cfg.WebhookBackoff), "first webhook retry delay; doubles up to 1h (ORDERD_WEBHOOK_BACKOFF)")
	fs.DurationVar(&cfg.WebhookTimeout, "webhook-timeout", envDuration("ORDERD_WEBHOOK_TIMEOUT", cfg.WebhookTimeout), "one webhook delivery's HTTP timeout (ORDERD_WEBHOOK_TIMEOUT)")
	fs.BoolVar(&cfg.WebhookAllowLoopback, "webhook-allow-loopback", envBool("ORDERD_WEBHOOK_ALLOW_LOOPBACK", cfg.WebhookAllowLoopback), "allow webhook URLs on loopback addresses (ORDERD_WEBHOOK_ALLOW_LOOPBACK)")
	fs.Float64Var(&cfg.RatePerCustomer, "rate-per-customer", envFloat("ORDERD_RATE_PER_CUSTOMER", cfg.RatePerCustomer), "placements, and separately payments, cancels and websocket tickets, per second per customer; 0 = off (ORDERD_RATE_PER_CUSTOMER)")
	fs.Float64Var(&cfg.RateDropEntries, "rate-drop-entries", envFloat("ORDERD_RATE_DROP_ENTRIES", cfg.RateDropEntries), "drop entries per second per customer; 0 = off (ORDERD_RATE_DROP_ENTRIES)")
	fs.Float64Var(&cfg.WSSubscribeRate, "ws-subscribe-rate", envFloat("ORDERD_WS_SUBSCRIBE_RATE", cfg.WSSubscribeRate), "websocket subscribes per second per connection; 0 = off (ORDERD_WS_SUBSCRIBE_RATE)")
	fs.Float64Var(&cfg.RateSignIn, "rate-sign-in", envFloat("ORDERD_RATE_SIGN_IN", cfg.RateSignIn), "sign-in code exchanges per second per client address; 0 = off (ORDERD_RATE_SIGN_IN)")
	fs.Float64Var(&cfg.RateGuest, "rate-guest", envFloat("ORDERD_RATE_GUEST", cfg.RateGuest), "guest sessions per second per client address; 0 = off (ORDERD_RATE_GUEST)")
	fs.DurationVar(&cfg.GuestTTL, "guest-ttl", envDuration("ORDERD_GUEST_TTL", cfg.GuestTTL), "how long a guest session's token lasts (ORDERD_GUEST_TTL)")
	fs.Float64Var(&cfg.RatePerIP, "rate-per-ip", envFloat("ORDERD_RATE_PER_IP", cfg.RatePerIP), "requests per second per client address; 0 = off (ORDERD_RATE_PER_IP)")
	fs.IntVar(&cfg.MaxConns, "max-conns", envInt("ORDERD_MAX_CONNS", cfg.MaxConns), "database connections of this process (ORDERD_MAX_CONNS)")
	fs.BoolVar(&cfg.Migrate, "migrate", envBool("ORDERD_MIGRATE", cfg.Migrate), "migrate the database before serving (ORDERD_MIGRATE)")
	fs.StringVar(&cfg.CheckpointKey, "checkpoint-key", envString("ORDERD_CHECKPOINT_KEY", cfg.CheckpointKey), "file holding the base64 Ed25519 seed that signs the log's checkpoints; set, this instance keeps the tamper-evident log (ORDERD_CHECKPOINT_KEY)")
	fs.DurationVar(&cfg.CheckpointInterval, "checkpoint-interval", envDuration("ORDERD_CHECKPOINT_INTERVAL", cfg.CheckpointInterval), "longest time between two checkpoints of a growing log (ORDERD_CHECKPOINT_INTERVAL)")
	fs.StringVar(&cfg.WitnessURL, "witness-url", envString("ORDERD_WITNESS_URL", cfg.WitnessURL), "where every checkpoint is sent through the outbox, signed like a webhook with the witness secret; instances without it leave the witness's messages to those with it (ORDERD_WITNESS_URL)")
	cliflags.Secret(fs, &cfg.WitnessSecret, "witness-secret", "ORDERD_WITNESS_SECRET", "signs what is sent to the witness, as a merchant's webhook secret signs webhooks; at least 32 bytes")
	fs.Func("allowed-origins", "comma-separated origins that may open websockets besides the same origin (ORDERD_ALLOWED_ORIGINS)", func(v string) error {
		cfg.AllowedOrigins = splitList(v)
		return nil
	})
	cfg.AllowedOrigins = splitList(os.Getenv("ORDERD_ALLOWED_ORIGINS"))
}

func splitList(v string) []string {
	var out []string
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}

func serveCommand(ctx context.Context, args []string, logger *slog.Logger) error {
	cfg := app.DefaultConfig()
	fs := newFlagSet("serve")
	configFlags(fs, &cfg)
	if err := fs.Parse(args); err != nil {
		return err
	}
	cfg.Logger = logger
	return serve(ctx, cfg)
}

func serve(ctx context.Context, cfg app.Config) error {
	tuneGC(os.LookupEnv, serverGCPercent)
	if envBool(app.BenchWithoutTimersEnv, false) {
		cfg.Logger.Warn("payment timers are not inserted: a benchmark's baseline; only the backstop closes unpaid orders", "env", app.BenchWithoutTimersEnv)
		cfg.WrapJobs = func(j store.JobInserter) store.JobInserter { return &timerDropper{JobInserter: j} }
	}
	a, err := app.New(ctx, cfg)
	if err != nil {
		return err
	}
	return a.Run(ctx)
}

func envString(name, def string) string {
	if v, ok := os.LookupEnv(name); ok && v != "" {
		return v
	}
	return def
}

func envInt(name string, def int) int {
	if v, ok := os.LookupEnv(name); ok && v != "" {
		if n, err := strconv.Atoi(v); err == nil {
			return n
		}
		fmt.Fprintf(os.Stderr, "orderd: ignoring %s=%q: not an integer\n", name, v)
	}
	return def
}

func envFloat(name string, def float64) float64 {
	if v, ok := os.LookupEnv(name); ok && v != "" {
		if n, err := strconv.ParseFloat(v, 64); err == nil {
			return n
		}
		fmt.Fprintf(os.Stderr, "orderd: ignoring %s=%q: not a number\n", name, v)
	}
	return def
}

func envBool(name string, def bool) bool {
	if v, ok := os.LookupEnv(name); ok && v != "" {
		if b, err := strconv.ParseBool(v); err == nil {
			return b
		}
		fmt.Fprintf(os.Stderr, "orderd: ignoring %s=%q: not a boolean\n", name, v)
	}
	return def
}

func envDuration(name string, def time.Duration) time.Duration {
	if v, ok := os.LookupEnv(name); ok && v != "" {
		if d, err := time.ParseDuration(v); err == nil {
			return d
		}
		fmt.Fprintf(os.Stderr, "orderd: ignoring %s=%q: not a duration\n", name, v)
	}
	return def
}
