package main

import (
	"bytes"
	"context"
	"flag"
	"regexp"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestHelpListsEverySubcommandAndFlag: orderd --help names every
// subcommand, dev's --reset and migrate's citus among them, and every flag
// each subcommand takes, as the subcommand itself lists them.
func TestHelpListsEverySubcommandAndFlag(t *testing.T) {
	var out, errOut bytes.Buffer
	require.NoError(t, run(context.Background(), []string{"--help"}, &out, &errOut))
	help := out.String()
	for _, want := range []string{"orderd serve", "orderd dev [--reset]", "orderd migrate up|down|status|citus", "orderd token", "orderd audit",
		"orderd rebuild", "orderd bench", "-reset", "-rate-guest", "-guest-ttl", "-merchant-id", "-apply"} {
		require.Contains(t, help, want)
	}
	flagLine := regexp.MustCompile(`(?m)^\s+-([a-z][a-z0-9-]*)`)
	for _, cmd := range subcommands {
		var own bytes.Buffer
		saved := helpOutput
		helpOutput = &own
		err := run(context.Background(), []string{cmd, "-h"}, &own, &own)
		helpOutput = saved
		require.ErrorIs(t, err, flag.ErrHelp, cmd)
		names := flagLine.FindAllStringSubmatch(own.String(), -1)
		require.NotEmpty(t, names, "%s lists no flags", cmd)
		for _, m := range names {
			require.Contains(t, help, "-"+m[1], "orderd --help leaves out %s's -%s", cmd, m[1])
		}
	}
}
