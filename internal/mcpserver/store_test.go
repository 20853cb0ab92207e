package mcpserver

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

func newStore(t *testing.T) *Store {
	t.Helper()
	s, err := OpenStore(filepath.Join(t.TempDir(), "sub", "issues.json"))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestStoreIdempotentByKey(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	a, replayed, err := s.CreateIssue("op-1", "Disk full", "db-3")
	if err != nil || replayed {
		t.Fatalf("first create: %+v replayed=%v err=%v", a, replayed, err)
	}
	// A second Store on the same file stands for a new server process.
	s2, err := OpenStore(s.Path())
	if err != nil {
		t.Fatal(err)
	}
	b, replayed, err := s2.CreateIssue("op-1", "Disk full", "db-3")
	if err != nil || !replayed || b.ID != a.ID {
		t.Fatalf("retry: got %+v replayed=%v err=%v, want %s replayed", b, replayed, err, a.ID)
	}
	c, replayed, err := s2.CreateIssue("op-2", "Disk full", "db-3")
	if err != nil || replayed || c.ID == a.ID {
		t.Fatalf("new key must create a new issue: %+v replayed=%v err=%v", c, replayed, err)
	}
	// No key: no deduplication.
	d, _, _ := s2.CreateIssue("", "Disk full", "db-3")
	e, _, _ := s2.CreateIssue("", "Disk full", "db-3")
	if d.ID == e.ID {
		t.Fatalf("calls without a key were deduplicated: %s", d.ID)
	}
	all, err := s.Issues()
	if err != nil || len(all) != 4 {
		t.Fatalf("issues = %d (%v), want 4", len(all), err)
	}
}

func TestStoreConflictNamesTheKey(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	a, _, err := s.CreateIssue("op-1", "Disk full", "")
	if err != nil {
		t.Fatal(err)
	}
	_, _, err = s.CreateIssue("op-1", "Disk almost full", "")
	var ce *ConflictError
	if !errors.As(err, &ce) {
		t.Fatalf("want ConflictError, got %v", err)
	}
	for _, want := range []string{`"op-1"`, a.ID, "Disk almost full", "nothing was created"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("conflict message %q lacks %q", err, want)
		}
	}
	all, _ := s.Issues()
	if len(all) != 1 {
		t.Fatalf("conflict created an issue: %d issues", len(all))
	}
}

func TestStoreLookup(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	if _, _, found, err := s.Lookup("op-9"); err != nil || found {
		t.Fatalf("unknown key: found=%v err=%v", found, err)
	}
	a, _, _ := s.CreateIssue("op-9", "t", "b")
	op, iss, found, err := s.Lookup("op-9")
	if err != nil || !found || iss.ID != a.ID || op.Tool != "create_issue" {
		t.Fatalf("lookup: %+v %+v found=%v err=%v", op, iss, found, err)
	}
	if _, err := s.Issue("ISS-404"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("unknown issue: %v", err)
	}
}

// Many concurrent writers, each with its own open store (as separate
// processes would have), lose nothing and duplicate nothing.
func TestStoreConcurrentWriters(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	var wg sync.WaitGroup
	ids := make([]string, 40)
	for i := range 40 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			st, err := OpenStore(s.Path())
			if err != nil {
				t.Error(err)
				return
			}
			key := fmt.Sprintf("op-%d", i%20) // every key twice
			iss, _, err := st.CreateIssue(key, "title "+key, "")
			if err != nil {
				t.Error(err)
				return
			}
			ids[i] = iss.ID
		}()
	}
	wg.Wait()
	all, err := s.Issues()
	if err != nil || len(all) != 20 {
		t.Fatalf("issues = %d (%v), want 20", len(all), err)
	}
	for i := range 20 {
		if ids[i] != ids[i+20] {
			t.Errorf("key op-%d gave %s and %s", i, ids[i], ids[i+20])
		}
	}
	// No temp files are left behind.
	ents, _ := os.ReadDir(filepath.Dir(s.Path()))
	for _, e := range ents {
		if strings.Contains(e.Name(), ".tmp-") {
			t.Errorf("leftover temp file %s", e.Name())
		}
	}
}

func TestStoreRejectsCorruptFile(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	if err := os.WriteFile(s.Path(), []byte("{not json"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.CreateIssue("k", "t", ""); err == nil || !strings.Contains(err.Error(), "not valid JSON") {
		t.Fatalf("want a clear error on a corrupt store, got %v", err)
	}
	b, _ := os.ReadFile(s.Path())
	if string(b) != "{not json" {
		t.Fatal("a corrupt store was overwritten")
	}
}
