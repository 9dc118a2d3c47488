package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/orderd/orderd/internal/cliflags"
	"github.com/orderd/orderd/migrations"
)

// citusFlags binds the settings of `orderd migrate citus`.
func citusFlags(fs *flag.FlagSet, citus *migrations.DistributeParams) {
	fs.IntVar(&citus.Shards, "shards", envInt("ORDERD_CITUS_SHARDS", citus.Shards), fmt.Sprintf("citus only: the shard count of merchants and every table co-located with it, when they are first distributed; 0 = %d for each active worker (ORDERD_CITUS_SHARDS)", migrations.ShardsPerWorker))
}

func migrateCommand(ctx context.Context, args []string, stdout io.Writer) error {
	fs := newFlagSet("migrate")
	var url string
	var citus migrations.DistributeParams
	cliflags.Secret(fs, &url, "database-url", "DATABASE_URL", "PostgreSQL connection string")
	citusFlags(fs, &citus)
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: orderd migrate [flags] up|down|status|citus")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return errors.New("usage: orderd migrate up|down|status|citus")
	}
	if url == "" {
		return errors.New("DATABASE_URL is required")
	}
	switch fs.Arg(0) {
	case "up":
		if err := migrations.Up(ctx, url); err != nil {
			return err
		}
		fmt.Fprintln(stdout, "database is current")
		return nil
	case "citus":
		done, err := migrations.Distribute(ctx, url, citus)
		if err != nil {
			return err
		}
		for _, d := range done {
			fmt.Fprintln(stdout, d)
		}
		fmt.Fprintln(stdout, "database is current and laid out on citus")
		return nil
	case "down":
		return migrations.Down(ctx, url)
	case "status":
		statuses, err := migrations.Status(ctx, url)
		if err != nil {
			return err
		}
		tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
		for _, s := range statuses {
			fmt.Fprintf(tw, "%v\n", s)
		}
		return tw.Flush()
	}
	return fmt.Errorf("unknown migrate action %q: use up, down, status or citus", fs.Arg(0))
}
