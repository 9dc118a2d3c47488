package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"time"
)

// exitCode makes main exit with a code without printing an error line: the
// command it ran printed its own.
type exitCode int

func (c exitCode) Error() string { return fmt.Sprintf("exit status %d", int(c)) }

// benchCommand runs orderd-bench, the load generator, found beside this
// binary (as `go install ./cmd/...` lays them out). It is a binary of its
// own so that the server links none of its scenarios, charts or progress
// bars.
func benchCommand(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	bin := filepath.Join(filepath.Dir(exe), "orderd-bench")
	if _, err := os.Stat(bin); err != nil {
		return fmt.Errorf("orderd bench runs orderd-bench, which is not beside this binary in %s: in a checkout, run `go run ./cmd/orderd-bench` with the same arguments, or install both with `go install ./cmd/...`", filepath.Dir(exe))
	}
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, stdout, stderr
	// A stopped orderd bench stops the bench as an interrupt would, so that
	// it stops the servers it started.
	cmd.Cancel = func() error { return cmd.Process.Signal(os.Interrupt) }
	cmd.WaitDelay = time.Minute
	err = cmd.Run()
	if exit := (*exec.ExitError)(nil); errors.As(err, &exit) && exit.ExitCode() > 0 {
		return exitCode(exit.ExitCode())
	}
	return err
}
