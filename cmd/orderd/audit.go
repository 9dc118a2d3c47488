package main

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"text/tabwriter"

	"github.com/orderd/orderd/internal/app"
	"github.com/orderd/orderd/internal/cliflags"
	"github.com/orderd/orderd/ledger/verify"
	"github.com/orderd/orderd/store"
)

// errBadCheckpoint makes main exit 2: the checkpoint the auditor kept is
// not one, or its signature fails; exit 1 stays "the history is broken".
var errBadCheckpoint = errors.New("bad checkpoint file")

// auditCommand checks the tamper-evident history (every chain, the log
// against every checkpoint, and against one kept outside), prints every
// invariant check, and fails on any break or violation.
func auditCommand(ctx context.Context, args []string, stdout io.Writer) error {
	fs := newFlagSet("audit")
	var url, keyFile string
	cliflags.Secret(fs, &url, "database-url", "DATABASE_URL", "PostgreSQL connection string")
	fs.StringVar(&keyFile, "checkpoint-key", envString("ORDERD_CHECKPOINT_KEY", ""), "the seed file that signs checkpoints: every checkpoint must be signed by its key (ORDERD_CHECKPOINT_KEY)")
	keptFile := fs.String("checkpoint", "", "a checkpoint kept outside orderd (the JSON of /v1/audit/checkpoints/latest) to check the history against")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if url == "" {
		return errors.New("DATABASE_URL is required")
	}
	var params store.HistoryAuditParams
	if keyFile != "" {
		key, err := app.LoadCheckpointKey(keyFile)
		if err != nil {
			return err
		}
		params.Key = key.Public().(ed25519.PublicKey)
	}
	if *keptFile != "" {
		kept, err := readKeptCheckpoint(*keptFile, params.Key)
		if err != nil {
			return err
		}
		params.Kept = kept
		if params.Key == nil {
			params.Key = kept.PublicKey
		}
	}
	// The history's parts and the invariant checks run at once, each on
	// connections of its own: each is CPU on the database's backends.
	pool, err := app.NewPool(ctx, url, 8, 0)
	if err != nil {
		return err
	}
	defer pool.Close()
	st := store.New(store.Config{Pool: pool})
	var report *store.AuditReport
	checks := make(chan error, 1)
	go func() {
		var err error
		report, err = st.Audit(ctx)
		checks <- err
	}()
	history, err := st.AuditHistory(ctx, params)
	if err != nil {
		<-checks
		return err
	}
	fmt.Fprintf(stdout, "history: %d logged events, %d checkpoints", history.Events, history.Checkpoints)
	if params.Kept != nil {
		fmt.Fprintf(stdout, " and the kept one (%s, size %d)", params.Kept.Log, params.Kept.Size)
	}
	fmt.Fprintln(stdout)
	for _, b := range history.Streams {
		fmt.Fprintf(stdout, "broken stream %s: %s\n", b.StreamID, b.Reason)
	}
	for _, b := range history.Broken {
		kept := ""
		if b.Kept {
			kept = " (kept)"
		}
		fmt.Fprintf(stdout, "broken checkpoint %s@%d%s: %s\n", b.Log, b.Size, kept, b.Reason)
	}
	if err := <-checks; err != nil {
		return err
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "check\tok\tviolations\tsample")
	for _, c := range report.Checks {
		sample := ""
		if len(c.Sample) > 0 {
			b, err := json.Marshal(c.Sample[0])
			if err != nil {
				return fmt.Errorf("print sample of %s: %w", c.Name, err)
			}
			sample = string(b)
		}
		fmt.Fprintf(tw, "%s\t%v\t%d\t%s\n", c.Name, c.OK, c.Violations, sample)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if !report.OK || !history.OK() {
		return errViolations
	}
	return nil
}

// readKeptCheckpoint reads a checkpoint kept outside and checks its
// signature, with key when given.
func readKeptCheckpoint(path string, key ed25519.PublicKey) (*verify.Checkpoint, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", errBadCheckpoint, err)
	}
	var c verify.Checkpoint
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&c); err != nil {
		return nil, fmt.Errorf("%w: %s is not a checkpoint's JSON: %w", errBadCheckpoint, path, err)
	}
	if err := c.Verify(key); err != nil {
		return nil, fmt.Errorf("%w: %s: %w", errBadCheckpoint, path, err)
	}
	return &c, nil
}
