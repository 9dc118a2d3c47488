package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/orderd/orderd/internal/app"
	"github.com/orderd/orderd/store"
)

// auditCommand prints every invariant check and fails on any violation.
func auditCommand(ctx context.Context, args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("audit", flag.ContinueOnError)
	var url string
	secretFlag(fs, &url, "database-url", "DATABASE_URL", "PostgreSQL connection string")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if url == "" {
		return errors.New("DATABASE_URL is required")
	}
	pool, err := app.NewPool(ctx, url, 2, 0)
	if err != nil {
		return err
	}
	defer pool.Close()
	report, err := store.New(pool, nil).Audit(ctx)
	if err != nil {
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
	if !report.OK {
		return errViolations
	}
	return nil
}
