package mcpserver

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"time"
)

// Issue is one issue created through create_issue.
type Issue struct {
	ID             string    `json:"id"`
	Title          string    `json:"title"`
	Body           string    `json:"body,omitempty"`
	CreatedAt      time.Time `json:"created_at"`
	IdempotencyKey string    `json:"idempotency_key,omitempty"`
}

// Operation is what the store remembers about one idempotency key: the tool
// it was used with, the canonical arguments, and the result it produced.
type Operation struct {
	Key       string          `json:"key"`
	Tool      string          `json:"tool"`
	Args      json.RawMessage `json:"args"`
	IssueID   string          `json:"issue_id"`
	CreatedAt time.Time       `json:"created_at"`
}

// storeFile is the on-disk document. It is rewritten whole on every change
// (temp file, fsync, rename, fsync of the directory) so a crash leaves either
// the old or the new version, never a torn one.
type storeFile struct {
	NextID     int                   `json:"next_id"`
	Issues     map[string]*Issue     `json:"issues"`
	Operations map[string]*Operation `json:"operations"`
}

// Store is the durable issue store of the test MCP server: one JSON file plus
// a sibling lock file. Every operation takes an exclusive flock on the lock
// file for its whole read-modify-write, so several server processes (one per
// call, as reckon's client starts them) can share a store safely.
type Store struct {
	path string
}

// ErrNotFound is returned by Issue for an unknown id.
var ErrNotFound = errors.New("not found")

// ConflictError is returned by CreateIssue when an idempotency key is reused
// with different arguments.
type ConflictError struct {
	Key      string
	Tool     string // the tool the key was first used with
	IssueID  string
	Existing json.RawMessage
	Given    json.RawMessage
}

// Error names the key, the issue it produced and both argument sets.
func (e *ConflictError) Error() string {
	tool := e.Tool
	if tool == "" {
		tool = "create_issue"
	}
	return fmt.Sprintf("idempotency key conflict: key %q was already used for %s with arguments %s (issue %s); this call has arguments %s — nothing was created",
		e.Key, tool, e.Existing, e.IssueID, e.Given)
}

// OpenStore returns a store at path, creating its directory. The file itself
// is created by the first write.
func OpenStore(path string) (*Store, error) {
	if path == "" {
		return nil, errors.New("store path is empty")
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("store path %q: %w", path, err)
	}
	if err := os.MkdirAll(filepath.Dir(abs), 0o755); err != nil {
		return nil, fmt.Errorf("creating store directory: %w", err)
	}
	return &Store{path: abs}, nil
}

// Path is the store's JSON file.
func (s *Store) Path() string { return s.path }

// withLock runs f with the store loaded under an exclusive lock; when f
// reports a change the document is written back before the lock is released.
func (s *Store) withLock(f func(doc *storeFile) (changed bool, err error)) error {
	lf, err := os.OpenFile(s.path+".lock", os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return fmt.Errorf("opening store lock: %w", err)
	}
	defer lf.Close()
	if err := syscall.Flock(int(lf.Fd()), syscall.LOCK_EX); err != nil {
		return fmt.Errorf("locking store: %w", err)
	}
	defer syscall.Flock(int(lf.Fd()), syscall.LOCK_UN) //nolint:errcheck // closing the file releases it too

	doc, err := s.load()
	if err != nil {
		return err
	}
	changed, err := f(doc)
	if err != nil || !changed {
		return err
	}
	return s.save(doc)
}

func (s *Store) load() (*storeFile, error) {
	doc := &storeFile{NextID: 1, Issues: map[string]*Issue{}, Operations: map[string]*Operation{}}
	b, err := os.ReadFile(s.path)
	if errors.Is(err, os.ErrNotExist) {
		return doc, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading store: %w", err)
	}
	if err := json.Unmarshal(b, doc); err != nil {
		return nil, fmt.Errorf("store %s is not valid JSON: %w", s.path, err)
	}
	if doc.Issues == nil {
		doc.Issues = map[string]*Issue{}
	}
	if doc.Operations == nil {
		doc.Operations = map[string]*Operation{}
	}
	if doc.NextID < 1 {
		doc.NextID = 1
	}
	return doc, nil
}

func (s *Store) save(doc *storeFile) error {
	b, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		return fmt.Errorf("encoding store: %w", err)
	}
	dir := filepath.Dir(s.path)
	tmp, err := os.CreateTemp(dir, filepath.Base(s.path)+".tmp-*")
	if err != nil {
		return fmt.Errorf("writing store: %w", err)
	}
	ok := false
	defer func() {
		if !ok {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	if _, err := tmp.Write(b); err != nil {
		return fmt.Errorf("writing store: %w", err)
	}
	if err := tmp.Sync(); err != nil {
		return fmt.Errorf("syncing store: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("closing store temp file: %w", err)
	}
	if err := os.Rename(tmp.Name(), s.path); err != nil {
		return fmt.Errorf("replacing store: %w", err)
	}
	ok = true
	// The rename is durable only once the directory entry is on disk.
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("syncing store directory: %w", err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("syncing store directory: %w", err)
	}
	return nil
}

// CreateIssue creates an issue. With a non-empty key it is idempotent: the
// first call persists the issue and the key in one write; a later call with
// the same key and the same canonical arguments returns the original issue
// (replayed=true) and creates nothing; the same key with different arguments
// is a *ConflictError.
func (s *Store) CreateIssue(key, title, body string) (issue Issue, replayed bool, err error) {
	return s.createIssue("create_issue", key, title, body)
}

// createIssue is CreateIssue on behalf of tool: a key is bound to the tool
// that first used it, so reusing it with another tool is a conflict too.
func (s *Store) createIssue(tool, key, title, body string) (issue Issue, replayed bool, err error) {
	args, err := json.Marshal(struct {
		Title string `json:"title"`
		Body  string `json:"body,omitempty"`
	}{title, body})
	if err != nil {
		return Issue{}, false, err
	}
	err = s.withLock(func(doc *storeFile) (bool, error) {
		if key != "" {
			if op, ok := doc.Operations[key]; ok {
				// The file is indented, so stored args are compared compacted.
				var stored bytes.Buffer
				if err := json.Compact(&stored, op.Args); err != nil {
					return false, fmt.Errorf("store is inconsistent: key %q has invalid args: %w", key, err)
				}
				if op.Tool != tool || stored.String() != string(args) {
					return false, &ConflictError{Key: key, Tool: op.Tool, IssueID: op.IssueID, Existing: stored.Bytes(), Given: args}
				}
				iss, ok := doc.Issues[op.IssueID]
				if !ok {
					return false, fmt.Errorf("store is inconsistent: key %q names issue %s, which is missing", key, op.IssueID)
				}
				issue, replayed = *iss, true
				return false, nil
			}
		}
		now := time.Now().UTC()
		id := "ISS-" + strconv.Itoa(doc.NextID)
		doc.NextID++
		iss := &Issue{ID: id, Title: title, Body: body, CreatedAt: now, IdempotencyKey: key}
		doc.Issues[id] = iss
		if key != "" {
			doc.Operations[key] = &Operation{Key: key, Tool: tool, Args: args, IssueID: id, CreatedAt: now}
		}
		issue = *iss
		return true, nil
	})
	return issue, replayed, err
}

// Issue returns one issue by id, or ErrNotFound.
func (s *Store) Issue(id string) (Issue, error) {
	var out Issue
	err := s.withLock(func(doc *storeFile) (bool, error) {
		iss, ok := doc.Issues[id]
		if !ok {
			return false, fmt.Errorf("issue %q: %w", id, ErrNotFound)
		}
		out = *iss
		return false, nil
	})
	return out, err
}

// Issues returns every issue (for tests and operators), in no set order.
func (s *Store) Issues() ([]Issue, error) {
	var out []Issue
	err := s.withLock(func(doc *storeFile) (bool, error) {
		for _, iss := range doc.Issues {
			out = append(out, *iss)
		}
		return false, nil
	})
	return out, err
}

// Lookup answers what happened to an idempotency key: the operation and the
// issue it produced, or found=false when the key was never seen.
func (s *Store) Lookup(key string) (op Operation, issue Issue, found bool, err error) {
	err = s.withLock(func(doc *storeFile) (bool, error) {
		o, ok := doc.Operations[key]
		if !ok {
			return false, nil
		}
		op, found = *o, true
		if iss, ok := doc.Issues[o.IssueID]; ok {
			issue = *iss
		}
		return false, nil
	})
	return op, issue, found, err
}
