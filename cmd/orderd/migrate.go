package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"text/tabwriter"

	"github.com/orderd/orderd/migrations"
)

func migrateCommand(ctx context.Context, args []string, stdout io.Writer) error {
	url := os.Getenv("DATABASE_URL")
	if url == "" {
		return errors.New("DATABASE_URL is required")
	}
	if len(args) != 1 {
		return errors.New("usage: orderd migrate up|down|status")
	}
	switch args[0] {
	case "up":
		if err := migrations.Up(ctx, url); err != nil {
			return err
		}
		fmt.Fprintln(stdout, "database is current")
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
	return fmt.Errorf("unknown migrate action %q: use up, down or status", args[0])
}
