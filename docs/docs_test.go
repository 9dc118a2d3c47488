// Package docs_test checks the documentation against itself and the code:
// links and anchors resolve, every test a page cites exists, and the
// configuration reference names exactly the variables the code reads.
package docs_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

const root = ".."

// pages are the Markdown files a reader follows links through.
func pages(t *testing.T) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "node_modules" || strings.HasPrefix(d.Name(), ".") && path != root) {
			return filepath.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(path, ".md") {
			out = append(out, path)
		}
		return nil
	})
	require.NoError(t, err)
	require.Contains(t, out, filepath.Join(root, "README.md"))
	return out
}

var (
	mdLink    = regexp.MustCompile(`\]\(([^)\s]+)\)`)
	htmlLink  = regexp.MustCompile(`(?:src|href)="([^"]+)"`)
	heading   = regexp.MustCompile(`(?m)^#{1,6} +(.+?) *$`)
	fence     = regexp.MustCompile("(?ms)^```.*?^```")
	slugStrip = regexp.MustCompile(`[^\p{L}\p{N}\- _]`)
)

// anchors are the ids GitHub gives a page's headings.
func anchors(page string) map[string]bool {
	seen := map[string]int{}
	out := map[string]bool{}
	for _, m := range heading.FindAllStringSubmatch(fence.ReplaceAllString(page, ""), -1) {
		text := strings.ReplaceAll(m[1], "`", "")
		slug := strings.ReplaceAll(strings.ToLower(slugStrip.ReplaceAllString(text, "")), " ", "-")
		if n := seen[slug]; n > 0 {
			out[slug+"-"+strconv.Itoa(n)] = true
		} else {
			out[slug] = true
		}
		seen[slug]++
	}
	return out
}

// TestEveryLinkResolves: a relative link names a file of the repository
// and, with a fragment, a heading of it.
func TestEveryLinkResolves(t *testing.T) {
	for _, p := range pages(t) {
		raw, err := os.ReadFile(p)
		require.NoError(t, err)
		text := fence.ReplaceAllString(string(raw), "")
		var targets []string
		for _, m := range mdLink.FindAllStringSubmatch(text, -1) {
			targets = append(targets, m[1])
		}
		for _, m := range htmlLink.FindAllStringSubmatch(text, -1) {
			targets = append(targets, m[1])
		}
		for _, target := range targets {
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			file, anchor, _ := strings.Cut(target, "#")
			dest := p
			if file != "" {
				dest = filepath.Join(filepath.Dir(p), file)
				_, err := os.Stat(dest)
				require.NoError(t, err, "%s links to %s, which does not exist", p, target)
			}
			if anchor == "" {
				continue
			}
			page, err := os.ReadFile(dest)
			require.NoError(t, err)
			require.True(t, anchors(string(page))[anchor], "%s links to %s: %s has no heading #%s", p, target, dest, anchor)
		}
	}
}

// TestNoPageReferencesFilesOutsideTheRepository: users have only the
// repository.
func TestNoPageReferencesFilesOutsideTheRepository(t *testing.T) {
	for _, p := range pages(t) {
		raw, err := os.ReadFile(p)
		require.NoError(t, err)
		for _, outside := range []string{"API.md", "DESIGN.md", "STYLE.md", "../shared"} {
			require.NotContains(t, string(raw), outside, "%s refers to %s, which users do not have", p, outside)
		}
	}
}

var citedTest = regexp.MustCompile("`(?:([a-z/]+)\\.)?((?:Test|Fuzz)[A-Za-z0-9_]+)")

// TestCitedTestsExist: a promise cites tests by name; a renamed or removed
// test must take its citation with it.
func TestCitedTestsExist(t *testing.T) {
	defined := map[string][]string{} // test name -> package directories
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "node_modules" || strings.HasPrefix(d.Name(), ".") && path != root) {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, "_test.go") {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, m := range regexp.MustCompile(`(?m)^func ((?:Test|Fuzz)\w+)\(`).FindAllStringSubmatch(string(src), -1) {
			rel, _ := filepath.Rel(root, filepath.Dir(path))
			defined[m[1]] = append(defined[m[1]], filepath.ToSlash(rel))
		}
		return nil
	})
	require.NoError(t, err)
	for _, p := range pages(t) {
		raw, err := os.ReadFile(p)
		require.NoError(t, err)
		for _, m := range citedTest.FindAllStringSubmatch(string(raw), -1) {
			pkg, name := m[1], m[2]
			dirs, ok := defined[name]
			require.True(t, ok, "%s cites %s, which no test file defines", p, m[0][1:])
			if pkg == "" {
				continue
			}
			found := false
			for _, d := range dirs {
				if d == pkg || strings.HasSuffix(d, "/"+pkg) {
					found = true
				}
			}
			require.True(t, found, "%s cites %s.%s, but %s is defined in %v", p, pkg, name, name, dirs)
		}
	}
}

var (
	variable       = regexp.MustCompile(`\b(?:ORDERD_[A-Z0-9_]+|DATABASE_URL)\b`)
	variableInCode = regexp.MustCompile(`"((?:ORDERD_[A-Z0-9_]+|DATABASE_URL))"`)
)

// TestConfigurationReferenceMatchesTheCode: every variable the reference
// lists is read by the code, and every variable the code names is in the
// reference.
func TestConfigurationReferenceMatchesTheCode(t *testing.T) {
	ref, err := os.ReadFile(filepath.Join(root, "docs", "configuration.md"))
	require.NoError(t, err)
	documented := map[string]bool{}
	for _, v := range variable.FindAllString(string(ref), -1) {
		documented[v] = true
	}
	inCode := map[string]string{}
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "node_modules" || strings.HasPrefix(d.Name(), ".") && path != root) {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, m := range variableInCode.FindAllStringSubmatch(string(src), -1) {
			inCode[m[1]] = path
		}
		return nil
	})
	require.NoError(t, err)
	var missing, stale []string
	for v, path := range inCode {
		if !documented[v] {
			missing = append(missing, v+" ("+path+")")
		}
	}
	for v := range documented {
		if _, ok := inCode[v]; !ok {
			stale = append(stale, v)
		}
	}
	sort.Strings(missing)
	sort.Strings(stale)
	require.Empty(t, missing, "variables the code reads that docs/configuration.md does not list")
	require.Empty(t, stale, "variables docs/configuration.md lists that no code reads")
}

// TestREADMEStaysShort: the README is the front door; the rest is in docs/.
func TestREADMEStaysShort(t *testing.T) {
	info, err := os.Stat(filepath.Join(root, "README.md"))
	require.NoError(t, err)
	require.Less(t, info.Size(), int64(25<<10), "README.md is over 25 KB: move the detail into docs/")
	raw, err := os.ReadFile(filepath.Join(root, "README.md"))
	require.NoError(t, err)
	// A figure such as 1000000 is all digits; an abbreviated commit hash
	// that is all digits is too rare to be worth refusing figures for.
	var commits []string
	for _, word := range regexp.MustCompile(`\b[0-9a-f]{7,40}\b`).FindAllString(string(raw), -1) {
		if strings.Trim(word, "0123456789") != "" {
			commits = append(commits, word)
		}
	}
	require.Empty(t, commits, "the README cites no commit")
}
