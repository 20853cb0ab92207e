package migrations

import (
	"bytes"
	"fmt"
	"io/fs"
	"strings"
	"time"
)

// directive starts every line the loader acts on; include is its one verb.
const (
	directive = "-- +reckon "
	include   = "include "
)

// expand returns the migrations of src (its *.sql files at the root) as
// goose reads them: each include directive replaced by the text of the
// file it names (a path in src). An unknown directive, a missing file or
// an included file that itself holds a directive is an error naming the
// migration, so nothing is applied from a tree that does not resolve.
func expand(src fs.FS) (fs.FS, error) {
	names, err := fs.Glob(src, "*.sql")
	if err != nil {
		return nil, fmt.Errorf("list migrations: %w", err)
	}
	out := expandedFS{src: src, files: make(map[string][]byte, len(names))}
	for _, name := range names {
		text, err := expandFile(src, name)
		if err != nil {
			return nil, fmt.Errorf("migration %s: %w", name, err)
		}
		out.files[name] = text
	}
	return out, nil
}

// expandFile is one migration's text with its includes expanded.
func expandFile(src fs.FS, name string) ([]byte, error) {
	text, err := fs.ReadFile(src, name)
	if err != nil {
		return nil, err
	}
	var out bytes.Buffer
	for i, line := range strings.SplitAfter(string(text), "\n") {
		target, ok, err := includeTarget(line)
		if err != nil {
			return nil, fmt.Errorf("line %d: %w", i+1, err)
		}
		if !ok {
			out.WriteString(line)
			continue
		}
		body, err := included(src, target)
		if err != nil {
			return nil, fmt.Errorf("line %d: %w", i+1, err)
		}
		out.Write(body)
	}
	return out.Bytes(), nil
}

// includeTarget is the file an include directive on line names; ok is
// false for a line that is not a directive.
func includeTarget(line string) (target string, ok bool, err error) {
	rest, found := strings.CutPrefix(strings.TrimSpace(line), directive)
	if !found {
		return "", false, nil
	}
	target, found = strings.CutPrefix(rest, include)
	target = strings.TrimSpace(target)
	if !found || target == "" {
		return "", false, fmt.Errorf("unknown directive %q: want %q followed by a file", strings.TrimSpace(line), directive+include)
	}
	return target, true, nil
}

// included is the text of the file an include names, ending in a newline.
func included(src fs.FS, target string) ([]byte, error) {
	body, err := fs.ReadFile(src, target)
	if err != nil {
		return nil, fmt.Errorf("include %s: %w", target, err)
	}
	if bytes.Contains(body, []byte(directive)) {
		return nil, fmt.Errorf("include %s: an included file holds no directive of its own", target)
	}
	if !bytes.HasSuffix(body, []byte("\n")) {
		body = append(body, '\n')
	}
	return body, nil
}

// expandedFS serves the expanded migrations and, for every other name
// (the directory goose lists), src.
type expandedFS struct {
	src   fs.FS
	files map[string][]byte
}

// Open implements fs.FS.
func (e expandedFS) Open(name string) (fs.File, error) {
	text, ok := e.files[name]
	if !ok {
		return e.src.Open(name)
	}
	return &memFile{Reader: bytes.NewReader(text), info: memInfo{name: name, size: int64(len(text))}}, nil
}

// memFile is an expanded migration, read from memory.
type memFile struct {
	*bytes.Reader
	info memInfo
}

func (f *memFile) Stat() (fs.FileInfo, error) { return f.info, nil }
func (f *memFile) Close() error               { return nil }

// memInfo describes a memFile.
type memInfo struct {
	name string
	size int64
}

func (i memInfo) Name() string       { return i.name }
func (i memInfo) Size() int64        { return i.size }
func (i memInfo) Mode() fs.FileMode  { return 0o444 }
func (i memInfo) ModTime() time.Time { return time.Time{} }
func (i memInfo) IsDir() bool        { return false }
func (i memInfo) Sys() any           { return nil }
