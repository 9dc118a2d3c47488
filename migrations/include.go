package migrations

import (
	"bytes"
	"fmt"
	"io"
	"io/fs"
	"path"
)

// includePrefix begins a migration's line that stands for a file's text. A
// trigger function that a later migration replaces is written once, in
// functions/, named for the migration that made it: that migration
// includes it, and the later one's down includes it to put it back. A body
// that serves several migrations unchanged in what they can reach is named
// for the function alone, and each of them includes it. A part that
// several versions of a function share word for word is a file of its own
// (named for the function and the part), which each version includes.
const includePrefix = "-- +orderd include "

// maxIncludeDepth bounds includes within included files, so that a file
// that includes itself is an error instead of a migration without end.
const maxIncludeDepth = 4

// expanded is the migrations as goose reads them: each include line of a
// migration replaced by the file it names.
type expanded struct{ fsys fs.FS }

func (e expanded) Open(name string) (fs.File, error) {
	f, err := e.fsys.Open(name)
	if err != nil || path.Dir(name) != "." || path.Ext(name) != ".sql" {
		return f, err
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return nil, err
	}
	raw, err := io.ReadAll(f)
	if err != nil {
		return nil, err
	}
	text, err := expandIncludes(e.fsys, raw, 0)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return &expandedFile{Reader: bytes.NewReader(text), info: expandedInfo{FileInfo: info, size: int64(len(text))}}, nil
}

// expandIncludes replaces each include line of raw with the named file,
// its own includes expanded; depth is how many includes raw is within.
func expandIncludes(fsys fs.FS, raw []byte, depth int) ([]byte, error) {
	var out bytes.Buffer
	for line := range bytes.Lines(raw) {
		name, ok := bytes.CutPrefix(bytes.TrimRight(line, "\r\n"), []byte(includePrefix))
		if !ok {
			out.Write(line)
			continue
		}
		if depth == maxIncludeDepth {
			return nil, fmt.Errorf("include %s: more than %d includes deep", name, maxIncludeDepth)
		}
		text, err := fs.ReadFile(fsys, string(name))
		if err != nil {
			return nil, fmt.Errorf("include: %w", err)
		}
		if text, err = expandIncludes(fsys, text, depth+1); err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		out.Write(text)
	}
	return out.Bytes(), nil
}

type expandedFile struct {
	*bytes.Reader
	info expandedInfo
}

func (f *expandedFile) Stat() (fs.FileInfo, error) { return f.info, nil }
func (f *expandedFile) Close() error               { return nil }

// expandedInfo is the migration file's, but for the size of its text.
type expandedInfo struct {
	fs.FileInfo
	size int64
}

func (i expandedInfo) Size() int64 { return i.size }
