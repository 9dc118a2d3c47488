package jobs_test

import (
	"context"
	"fmt"
	"os"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/orderd/orderd/jobs"
	"github.com/orderd/orderd/store"
)

// workersHelperDB, when set, makes the test binary a process that runs
// orderd's workers (River and the backstop) on that database until it is
// killed: the process TestTimersSurviveRestart kills.
const workersHelperDB = "ORDERD_JOBS_WORKERS_HELPER_DB"

func TestMain(m *testing.M) {
	if url := os.Getenv(workersHelperDB); url != "" {
		if err := runWorkers(url); err != nil {
			fmt.Fprintln(os.Stderr, "workers helper:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// runWorkers runs what every orderd process runs of the jobs, says
// "working" on stdout once River has started, and never returns.
func runWorkers(url string) error {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		return err
	}
	ins, err := jobs.NewInserter(pool)
	if err != nil {
		return err
	}
	st := store.New(store.Config{Pool: pool, Jobs: ins})
	cfg := jobs.DefaultConfig()
	client, err := jobs.NewClient(pool, st, cfg)
	if err != nil {
		return err
	}
	if err := client.Start(ctx); err != nil {
		return err
	}
	go jobs.NewBackstop(st, cfg).Run(ctx)
	fmt.Println("working")
	select {}
}
