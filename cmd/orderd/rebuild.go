package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/orderd/orderd/internal/app"
	"github.com/orderd/orderd/internal/cliflags"
	"github.com/orderd/orderd/store"
)

// rebuildCommand replays every stream into fresh projections and reports
// where the live ones differ; with --apply it swaps the replayed ones in.
func rebuildCommand(ctx context.Context, args []string, stdout io.Writer) error {
	fs := newFlagSet("rebuild")
	apply := fs.Bool("apply", false, "write the replayed projections over the live ones, atomically")
	var url string
	cliflags.Secret(fs, &url, "database-url", "DATABASE_URL", "PostgreSQL connection string")
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
	report, err := store.New(store.Config{Pool: pool}).Rebuild(ctx, *apply)
	if err != nil {
		return fmt.Errorf("rebuild: %w", err)
	}
	fmt.Fprintf(stdout, "replayed %d events of %d streams, holding at most %d folded orders at once; %d differences from the live projections\n",
		report.Events, report.Streams, report.MostOrdersHeld, report.DifferenceCount)
	if len(report.Differences) > 0 {
		tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "table\tid\tcolumn\tlive\treplayed")
		for _, d := range report.Differences {
			column := d.Column
			if column == "" {
				column = "(row)"
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", d.Table, d.ID, column, d.Live, d.Replay)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	switch {
	case report.Applied:
		fmt.Fprintln(stdout, "applied: the live projections now match the events")
	case report.DifferenceCount > 0:
		return errViolations
	}
	return nil
}
