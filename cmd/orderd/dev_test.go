package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/orderd/orderd/store/storetest"
)

// devRun is one `orderd dev` process and the variables it printed.
type devRun struct {
	cmd  *exec.Cmd
	vars map[string]string
	// links are the sign-in links it printed, by whom they sign in.
	links map[string]string
	done  chan error
}

// startDev runs `orderd dev` in dir on dbURL and waits for its welcome.
func startDev(t *testing.T, dir, dbURL string, args ...string) *devRun {
	t.Helper()
	bin, err := buildOnce()
	require.NoError(t, err)
	cmd := exec.Command(bin, append([]string{"dev"}, args...)...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "DATABASE_URL="+dbURL, "ORDERD_ADDR=127.0.0.1:0", "ORDERD_OPS_ADDR=127.0.0.1:0",
		"ORDERD_JWT_SECRET=", "ORDERD_RATE_PER_CUSTOMER=0")
	var logs lockedBuffer
	cmd.Stderr = &logs
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	d := &devRun{cmd: cmd, vars: map[string]string{}, links: map[string]string{}, done: make(chan error, 1)}
	welcomed := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(out)
		seen := false
		for sc.Scan() {
			line := sc.Text()
			if kv, ok := strings.CutPrefix(line, "export "); ok {
				k, v, _ := strings.Cut(kv, "=")
				d.vars[k] = strings.Trim(v, "'")
			}
			if fields := strings.Fields(line); len(fields) == 2 && strings.Contains(fields[1], "#code=") {
				d.links[fields[0]] = fields[1]
			}
			if strings.Contains(line, "scripts/tour.sh") && !seen {
				seen = true
				close(welcomed)
			}
		}
		d.done <- cmd.Wait()
	}()
	t.Cleanup(func() { d.stop(t) })
	select {
	case <-welcomed:
	case err := <-d.done:
		t.Fatalf("orderd dev exited before its welcome: %v\n%s", err, logs.String())
	case <-time.After(60 * time.Second):
		t.Fatalf("orderd dev printed no welcome within a minute\n%s", logs.String())
	}
	return d
}

func (d *devRun) stop(t *testing.T) {
	if d.cmd.ProcessState != nil || d.done == nil {
		return
	}
	_ = d.cmd.Process.Signal(syscall.SIGINT)
	select {
	case <-d.done:
	case <-time.After(30 * time.Second):
		_ = d.cmd.Process.Kill()
		<-d.done
	}
	d.done = nil
}

func (d *devRun) get(t *testing.T, path, tokenVar string) int {
	t.Helper()
	req, err := http.NewRequest("GET", d.vars["ORDERD"]+path, nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+d.vars[tokenVar])
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	return resp.StatusCode
}

func (d *devRun) tour(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs("../..")
	require.NoError(t, err)
	cmd := exec.Command("bash", filepath.Join(root, "scripts", "tour.sh"))
	cmd.Env = os.Environ()
	for k, v := range d.vars {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "the tour failed:\n%s", out)
	return string(out)
}

// runGettingStarted runs every block docs/getting-started.md marks
// `sh runnable` against this dev, with the tour's variables set: a page a
// newcomer copies from keeps working.
func (d *devRun) runGettingStarted(t *testing.T) {
	t.Helper()
	root, err := filepath.Abs("../..")
	require.NoError(t, err)
	page, err := os.ReadFile(filepath.Join(root, "docs", "getting-started.md"))
	require.NoError(t, err)
	blocks := runnableBlocks(string(page))
	require.NotEmpty(t, blocks, "getting-started marks its runnable blocks")
	for _, block := range blocks {
		cmd := exec.Command("bash", "-euo", "pipefail", "-c", block)
		cmd.Dir = root
		cmd.Env = os.Environ()
		for k, v := range d.vars {
			cmd.Env = append(cmd.Env, k+"="+v)
		}
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "a runnable block of docs/getting-started.md failed:\n%s\n%s", block, out)
	}
}

// runnableBlocks are the bodies of a Markdown page's "```sh runnable" blocks.
func runnableBlocks(page string) []string {
	var blocks []string
	var cur []string
	in := false
	for _, line := range strings.Split(page, "\n") {
		switch {
		case !in && strings.TrimSpace(line) == "```sh runnable":
			in, cur = true, nil
		case in && strings.TrimSpace(line) == "```":
			in = false
			blocks = append(blocks, strings.Join(cur, "\n"))
		case in:
			cur = append(cur, line)
		}
	}
	return blocks
}

// TestDevTourRunsTwice runs the tour script twice against one
// `orderd dev`: the second run places new orders (fresh Idempotency-Keys)
// and finds the demo merchant as the first left it. Then dev starts again
// in the same directory: the JWT secret it keeps there is the same, so the
// tokens printed before still work; and `dev --reset` starts from clean
// demo data.
func TestDevTourRunsTwice(t *testing.T) {
	t.Parallel()
	dir, dbURL := t.TempDir(), storetest.URL(t)
	first := startDev(t, dir, dbURL)
	require.Equal(t, dbURL, first.vars["DATABASE_URL"], "dev prints DATABASE_URL")
	require.Equal(t, first.vars["ORDERD"]+"/?merchant="+first.vars["MERCHANT_ID"], strings.Split(first.links["alice"], "#")[0])
	_, code, ok := strings.Cut(first.links["kitchen"], "/kitchen#code=")
	require.True(t, ok, "a kitchen sign-in link: %v", first.links)
	signIn := func() (int, map[string]any) {
		resp, err := http.Post(first.vars["ORDERD"]+"/v1/sign-in", "application/json", strings.NewReader(`{"code":"`+code+`"}`))
		require.NoError(t, err)
		defer resp.Body.Close()
		var body map[string]any
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&body))
		return resp.StatusCode, body
	}
	status, signedIn := signIn()
	require.Equal(t, http.StatusOK, status, "%v", signedIn)
	require.Equal(t, "merchant", signedIn["role"])
	require.Equal(t, first.vars["MERCHANT_ID"], signedIn["merchant_id"])
	status, _ = signIn()
	require.Equal(t, http.StatusUnauthorized, status, "a link works once")
	out := first.tour(t)
	require.Contains(t, out, "The tour is over")
	require.Contains(t, out, "queue_position\":2", "a real queue: the third order waits second in line")
	again := first.tour(t)
	require.Contains(t, again, "The tour is over")
	first.runGettingStarted(t)
	require.NotEqual(t, orderIDs(out), orderIDs(again), "the second run placed orders of its own")

	secretPath := filepath.Join(dir, ".orderd", "jwt-secret")
	secret, err := os.ReadFile(secretPath)
	require.NoError(t, err)
	require.GreaterOrEqual(t, len(strings.TrimSpace(string(secret))), 64, "32 random bytes, hex")
	info, err := os.Stat(secretPath)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), info.Mode().Perm())
	first.stop(t)

	second := startDev(t, dir, dbURL)
	kept, err := os.ReadFile(secretPath)
	require.NoError(t, err)
	require.Equal(t, string(secret), string(kept))
	require.Equal(t, first.vars["MERCHANT_ID"], second.vars["MERCHANT_ID"])
	require.Equal(t, http.StatusOK, second.get(t, "/v1/merchants/"+first.vars["MERCHANT_ID"], "ADMIN"))
	first.vars["ORDERD"] = second.vars["ORDERD"]
	require.Equal(t, http.StatusOK, first.get(t, "/v1/merchants/"+first.vars["MERCHANT_ID"], "ADMIN"),
		"yesterday's token still works")
	second.stop(t)

	reset := startDev(t, dir, dbURL, "--reset")
	require.NotEqual(t, first.vars["MERCHANT_ID"], reset.vars["MERCHANT_ID"], "a new demo merchant")
	require.Equal(t, http.StatusNotFound, reset.get(t, "/v1/merchants/"+first.vars["MERCHANT_ID"], "ADMIN"), "the old data is gone")
	require.Contains(t, reset.tour(t), "The tour is over")
}

// orderIDs are the order ids a tour's output shows.
func orderIDs(out string) []string {
	var ids []string
	for _, line := range strings.Split(out, "\n") {
		if i := strings.Index(line, `{"id":"`); i >= 0 && strings.Contains(line, `"customer_id"`) {
			ids = append(ids, line[i+7:i+7+36])
		}
	}
	return ids
}

// TestLogsAreTextOnATerminal: a person at a terminal reads text, a log
// collector reads JSON; ORDERD_LOG_FORMAT overrides either way.
func TestLogsAreTextOnATerminal(t *testing.T) {
	t.Parallel()
	tty := openTerminal(t)
	require.Equal(t, "text", logFormat(tty, ""), "text on a terminal")
	require.Equal(t, "json", logFormat(tty, "json"))

	file, err := os.Create(filepath.Join(t.TempDir(), "log"))
	require.NoError(t, err)
	defer file.Close()
	require.Equal(t, "json", logFormat(file, ""), "JSON into a file")
	require.Equal(t, "text", logFormat(file, "text"))
	require.Equal(t, "json", logFormat(&strings.Builder{}, ""), "JSON into anything that is not a terminal")

	_, isText := logHandler(file, "text").(*slog.TextHandler)
	require.True(t, isText)
	_, isJSON := logHandler(file, "json").(*slog.JSONHandler)
	require.True(t, isJSON)
}

// openTerminal opens the follower side of a new pseudo-terminal.
func openTerminal(t *testing.T) *os.File {
	t.Helper()
	leader, err := os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY, 0)
	require.NoError(t, err)
	t.Cleanup(func() { leader.Close() })
	fd := int(leader.Fd())
	require.NoError(t, unix.IoctlSetPointerInt(fd, unix.TIOCSPTLCK, 0))
	n, err := unix.IoctlGetInt(fd, unix.TIOCGPTN)
	require.NoError(t, err)
	follower, err := os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|syscall.O_NOCTTY, 0)
	require.NoError(t, err)
	t.Cleanup(func() { follower.Close() })
	return follower
}
