package reckontest

import (
	"bytes"
	"strings"
	"sync"
)

// Buffer collects writes from several goroutines (a server's log lines, a
// child process's output) for a test to read.
type Buffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

// Write implements io.Writer.
func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// String returns everything written so far.
func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// Lines returns what was written, one element a line.
func (b *Buffer) Lines() []string { return strings.Split(strings.TrimSpace(b.String()), "\n") }
