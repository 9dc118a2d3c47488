// Command orderd is the binary of orderd: the service, its developer mode,
// migrations, audits, projection rebuilds and tokens; `orderd bench` runs
// the load generator, orderd-bench, beside it.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"runtime/debug"
	"syscall"

	"golang.org/x/term"
)

const usage = `orderd: order admission for food and drink platforms, on PostgreSQL alone.

Usage:
  orderd serve [flags]          serve REST, websocket and River workers (DATABASE_URL, ORDERD_JWT_SECRET)
  orderd dev [--reset] [flags]  find or start a local PostgreSQL, migrate, load demo data, serve
  orderd migrate up|down|status|citus   apply, roll back one, list, or lay out on Citus (ours and River's)
  orderd token --role R --sub S [--merchant-id ID] [--lane L] [--ttl D]   print a signed bearer token
  orderd audit [--checkpoint F] recompute every chain, check the log against every checkpoint (and F, kept
                                outside) and run every invariant check; exit 1 on any break or violation,
                                2 when F is not a checkpoint or its signature fails
  orderd rebuild [--apply]      rebuild projections from events and compare (or swap them in)
  orderd bench SCENARIO         the load generator: runs orderd-bench beside this binary with the same
                                arguments (in a checkout: go run ./cmd/orderd-bench --help)
  orderd help                   this text, with every subcommand's flags
`

// helpOutput is where the subcommands' flag sets print their usage: the
// standard error, unless help prints them all to the standard output.
var helpOutput io.Writer = os.Stderr

// newFlagSet is a subcommand's flag set, printing its usage to helpOutput.
func newFlagSet(name string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(helpOutput)
	return fs
}

// subcommands are every subcommand that takes flags, in the order help
// lists them.
var subcommands = []string{"serve", "dev", "migrate", "token", "audit", "rebuild"}

// printHelp prints the usage and then every subcommand's flags, each asked
// of the subcommand itself (-h), so that no flag is left out of it.
func printHelp(ctx context.Context, stdout io.Writer) error {
	fmt.Fprint(stdout, usage)
	saved := helpOutput
	helpOutput = stdout
	defer func() { helpOutput = saved }()
	for _, cmd := range subcommands {
		fmt.Fprintf(stdout, "\norderd %s:\n", cmd)
		if err := run(ctx, []string{cmd, "-h"}, stdout, stdout); err != nil && !errors.Is(err, flag.ErrHelp) {
			return fmt.Errorf("help of %s: %w", cmd, err)
		}
	}
	return nil
}

// errViolations makes main exit 1 without printing an error line: the command
// printed its report already.
var errViolations = errors.New("violations found")

// gcPercent is every command's garbage collector target unless GOGC says
// otherwise: orderd allocates per request and per statement while its live
// heap stays small, so Go's default of 100 collects many times a second.
// A server raises it further (serverGCPercent).
const gcPercent = 200

// serverGCPercent is a server's collector target when GOGC is not set. Its
// live heap is small next to what a burst allocates every second (request
// bodies, events, statement arguments), so each collection's marking, paid
// many times a second, is CPU that placements could use; a heap allowed to
// grow to five times its live data between collections is still small.
const serverGCPercent = 400

// tuneGC sets the collector's target to percent, unless the operator chose
// one with GOGC (an empty GOGC chooses nothing, as the runtime reads it).
func tuneGC(lookupEnv func(string) (string, bool), percent int) {
	if v, _ := lookupEnv("GOGC"); v == "" {
		debug.SetGCPercent(percent)
	}
}

func main() {
	tuneGC(os.LookupEnv, gcPercent)
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	var code exitCode
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
		// --help printed the usage it was asked for.
	case errors.Is(err, errViolations):
		os.Exit(1)
	case errors.As(err, &code):
		os.Exit(int(code))
	case errors.Is(err, errBadCheckpoint):
		fmt.Fprintln(os.Stderr, "orderd:", err)
		os.Exit(2)
	default:
		fmt.Fprintln(os.Stderr, "orderd:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return errors.New("a subcommand is required")
	}
	logs := newLogWriter(stderr)
	defer logs.Flush()
	logger := slog.New(errorsAtOnce{logHandler(logs, logFormat(stderr, os.Getenv("ORDERD_LOG_FORMAT"))), logs})
	slog.SetDefault(logger)
	cmd, rest := args[0], args[1:]
	switch cmd {
	case "serve":
		return serveCommand(ctx, rest, logger)
	case "dev":
		return devCommand(ctx, rest, stdout, logger)
	case "migrate":
		return migrateCommand(ctx, rest, stdout)
	case "token":
		return tokenCommand(rest, stdout)
	case "bench":
		return benchCommand(ctx, rest, stdout, stderr)
	case "audit":
		return auditCommand(ctx, rest, stdout)
	case "rebuild":
		return rebuildCommand(ctx, rest, stdout)
	case "help", "-h", "--help":
		return printHelp(ctx, stdout)
	}
	fmt.Fprint(stderr, usage)
	return fmt.Errorf("unknown subcommand %q", cmd)
}

// logFormat is "text" for a person at a terminal and "json" for a log
// collector otherwise; format (from ORDERD_LOG_FORMAT) decides instead when
// set. out is where the lines end up, not a writer wrapping it.
func logFormat(out io.Writer, format string) string {
	if format != "" {
		return format
	}
	if f, ok := out.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		return "text"
	}
	return "json"
}

func logHandler(w io.Writer, format string) slog.Handler {
	opts := &slog.HandlerOptions{Level: slog.LevelInfo}
	if format == "text" {
		return slog.NewTextHandler(w, opts)
	}
	return slog.NewJSONHandler(w, opts)
}
