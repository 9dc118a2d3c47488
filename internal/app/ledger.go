package app

import (
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"errors"
	"fmt"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/orderd/orderd/store"
)

// LoadCheckpointKey reads the Ed25519 key that signs checkpoints: a file
// holding its 32-byte seed in base64.
func LoadCheckpointKey(path string) (ed25519.PrivateKey, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read the checkpoint key: %w", err)
	}
	seed, err := base64.StdEncoding.DecodeString(strings.TrimSpace(string(b)))
	if err != nil || len(seed) != ed25519.SeedSize {
		return nil, fmt.Errorf("the checkpoint key in %s is not a base64 %d-byte seed", path, ed25519.SeedSize)
	}
	return ed25519.NewKeyFromSeed(seed), nil
}

// CheckWitness refuses a witness that cannot be sent anything: a URL that
// is not absolute http or https, or one without a secret to sign with.
func CheckWitness(witnessURL, secret string) error {
	if witnessURL == "" {
		if secret != "" {
			return errors.New("ORDERD_WITNESS_SECRET is set without ORDERD_WITNESS_URL")
		}
		return nil
	}
	u, err := url.Parse(witnessURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("ORDERD_WITNESS_URL %q is not an absolute http or https URL", witnessURL)
	}
	if len(secret) < MinJWTSecret {
		return fmt.Errorf("ORDERD_WITNESS_SECRET must be at least %d bytes when ORDERD_WITNESS_URL is set (make one with: openssl rand -hex 32)", MinJWTSecret)
	}
	return nil
}

// logTick is how often an instance tries to extend the log: the log
// follows the events by about this much, whatever the checkpoint interval.
const logTick = time.Second

// runLog extends the logs and makes their checkpoints until ctx ends. Every
// instance runs it; the one that holds a log's head does that log's work.
// On Citus there is a log per node, and the nodes are asked again every
// round: a worker added to the cluster gets its log.
func (a *App) runLog(ctx context.Context) {
	t := time.NewTicker(min(logTick, a.cfg.CheckpointInterval))
	defer t.Stop()
	for {
		logs, err := a.store.Logs(ctx)
		if err != nil && ctx.Err() == nil {
			a.log.Warn("list the logs", "err", err)
		}
		for _, log := range logs {
			res, err := a.store.ExtendLog(ctx, store.ExtendLogParams{Log: log, Key: a.checkpointKey, Interval: a.cfg.CheckpointInterval,
				Witness: a.cfg.WitnessURL != ""})
			switch {
			case ctx.Err() != nil:
				return
			case err != nil:
				a.log.Warn("extend the log", "log", log, "err", err)
			case res.Checkpoint != nil:
				a.log.Info("checkpoint", "log", res.Checkpoint.Log, "size", res.Checkpoint.Size)
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
