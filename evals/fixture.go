// Package evals measures how good supervisor verdicts are. Drills record
// fixtures — the exact wall a supervisor would see plus the ground truth of
// every operation on it, taken from the fault injector's record and never
// from the events the supervisor sees — and the scorer runs a supervisor on
// every fixture and writes a scorecard (report.md, report.json and a
// confusion-matrix chart). See README.md in this folder for the format.
package evals

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/seed-7bc021c3/reckon/kernel"
	"github.com/seed-7bc021c3/reckon/pipeline"
	"github.com/seed-7bc021c3/reckon/pipeline/supervisor"
)

// FixtureVersion is the version of the fixture format this package reads
// and writes. A fixture with any other version is rejected, never guessed at.
const FixtureVersion = 1

// Ground-truth values of an operation.
const (
	TruthOccurred = "occurred" // the effect committed (fault fired after it)
	TruthNone     = "none"     // the effect never happened (fault fired before it)
)

// Fixture is one drilled run: the wall the supervisor sees and the truth.
type Fixture struct {
	Version int `json:"version"`
	// ID is unique within a suite; the file is named <id>.json.
	ID string `json:"id"`
	// Scenario is the drill scenario kind that produced the run.
	Scenario string `json:"scenario"`
	// Seed is the generator seed of the drill invocation that produced it.
	Seed uint64 `json:"seed"`
	// GeneratedBy is the command line that produced the fixture.
	GeneratedBy string `json:"generated_by"`
	// Wall is the wall exactly as the pipeline builds it.
	Wall pipeline.Wall `json:"wall"`
	// Truth maps every operation id of the wall to occurred or none.
	Truth map[string]string `json:"truth"`
	// ExpectNeedsAttention is true when at least one operation of the wall
	// is not decided by the wall's own evidence (see Decidable).
	ExpectNeedsAttention bool `json:"expect_needs_attention"`
	// Notes explain the scenario to a person reading the fixture (what was
	// faulted, what traps the wall holds). The supervisor never sees them.
	Notes string `json:"notes"`
}

// Decidable reports whether the wall's own evidence settles an operation's
// effect, and to what. It is supervisor.Prove, the one rule the built-in
// supervisor decides by and settlement trusts (its doc lists what counts
// as evidence), so the suite's expectations can never disagree with it.
func Decidable(op pipeline.WallOperation) (effect string, ok bool) {
	p := supervisor.Prove(op)
	return p.Effect, p.Proven()
}

// ExpectNeedsAttention is the fixture format's definition of
// expect_needs_attention: true when any operation of the wall is not
// Decidable, so a careful supervisor must leave it unknown and ask a person.
func ExpectNeedsAttention(w pipeline.Wall) bool {
	for _, op := range w.Operations {
		if _, ok := Decidable(op); !ok {
			return true
		}
	}
	return false
}

// Validate checks a fixture for internal consistency: version, id, a wall
// with operations, a truth for every operation and none for anything else,
// and expect_needs_attention matching its definition. The error names the
// field at fault.
func (f *Fixture) Validate() error {
	if f.Version != FixtureVersion {
		return fmt.Errorf("version: %d is not supported (this build reads version %d)", f.Version, FixtureVersion)
	}
	if f.ID == "" {
		return errors.New("id: missing")
	}
	if strings.ContainsAny(f.ID, `/\ `) {
		return fmt.Errorf("id: %q must not contain slashes or spaces (it names the file)", f.ID)
	}
	// The id names the file <id>.json beside the suite's manifest: it may
	// not be the manifest's name, a hidden file, or hold characters that
	// print as something else (kernel.Printable) in a report or a listing.
	if f.ID == strings.TrimSuffix(ManifestFile, ".json") || strings.HasPrefix(f.ID, ".") || kernel.Printable(f.ID) != f.ID {
		return fmt.Errorf("id: %s is not a fixture file name (not %q, no leading dot, no control or format characters)", kernel.Printable(f.ID), strings.TrimSuffix(ManifestFile, ".json"))
	}
	if f.Scenario == "" {
		return errors.New("scenario: missing")
	}
	if len(f.Wall.Operations) == 0 {
		return errors.New("wall.operations: empty (a wall holds at least one unsettled operation)")
	}
	seen := make(map[string]bool, len(f.Wall.Operations))
	for i, op := range f.Wall.Operations {
		if op.OperationID == "" {
			return fmt.Errorf("wall.operations[%d].operation_id: missing", i)
		}
		if seen[op.OperationID] {
			return fmt.Errorf("wall.operations[%d].operation_id: %q appears twice", i, op.OperationID)
		}
		seen[op.OperationID] = true
		t, ok := f.Truth[op.OperationID]
		if !ok {
			return fmt.Errorf("truth: no entry for operation %q", op.OperationID)
		}
		if t != TruthOccurred && t != TruthNone {
			return fmt.Errorf("truth[%q]: %q is not occurred or none", op.OperationID, t)
		}
	}
	for id := range f.Truth {
		if !seen[id] {
			return fmt.Errorf("truth[%q]: not an operation of the wall", id)
		}
	}
	if want := ExpectNeedsAttention(f.Wall); f.ExpectNeedsAttention != want {
		return fmt.Errorf("expect_needs_attention: %v, but the wall's evidence says %v (see evals/README.md)", f.ExpectNeedsAttention, want)
	}
	return nil
}

// Marshal renders a fixture as indented JSON with a trailing newline, the
// form committed to the suite (stable, so a regenerated suite diffs well).
func (f *Fixture) Marshal() ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	if err := enc.Encode(f); err != nil {
		return nil, fmt.Errorf("marshal fixture %s: %w", f.ID, err)
	}
	return buf.Bytes(), nil
}

// WriteFixture validates f and writes it to dir/<id>.json atomically
// (temporary file and rename), so an interrupted drill never leaves half a
// fixture behind.
func WriteFixture(dir string, f *Fixture) (string, error) {
	if err := f.Validate(); err != nil {
		return "", fmt.Errorf("fixture %s: %w", f.ID, err)
	}
	if f.Wall.Digest != "" {
		d, err := f.Wall.ComputeDigest()
		if err != nil {
			return "", fmt.Errorf("fixture %s: wall.digest: %w", f.ID, err)
		}
		if d != f.Wall.Digest {
			return "", fmt.Errorf("fixture %s: wall.digest: %s does not match the wall's content (%s)", f.ID, f.Wall.Digest, d)
		}
	}
	b, err := f.Marshal()
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("create fixture folder: %w", err)
	}
	path := filepath.Join(dir, f.ID+".json")
	if err := writeFileAtomic(path, b); err != nil {
		return "", err
	}
	return path, nil
}

func writeFileAtomic(path string, b []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if _, err := tmp.Write(b); err != nil {
		tmp.Close()
		os.Remove(tmp.Name())
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := os.Chmod(tmp.Name(), 0o644); err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// ParseFixture decodes and validates one fixture. Unknown fields are
// rejected so a typo in a hand-inspected fixture never passes silently.
// A duplicate key anywhere is rejected too: encoding/json lets the last
// one win (a second "truth" entry for an operation would silently replace
// the first), and a second "wall" the decoder merges into the first would
// let the wall scored differ from the wall the digest covers.
func ParseFixture(b []byte) (*Fixture, error) {
	if err := kernel.CheckJSON("decode", b); err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var f Fixture
	if err := dec.Decode(&f); err != nil {
		return nil, fmt.Errorf("decode: %w", err)
	}
	if dec.More() {
		return nil, errors.New("decode: trailing data after the fixture")
	}
	if err := f.Validate(); err != nil {
		return nil, err
	}
	if err := checkStoredDigest(b, f.Wall.Digest); err != nil {
		return nil, err
	}
	return &f, nil
}

// checkStoredDigest recomputes the wall's digest the way the sweep does
// (SHA-256 of the canonical JSON with the digest emptied) over the wall exactly
// as stored in the file, not as re-marshalled by this build: a wall edited
// after the drill recorded it fails, while fields added to pipeline.Wall
// later do not disturb fixtures recorded before them.
func checkStoredDigest(fixture []byte, digest string) error {
	if digest == "" {
		return nil
	}
	var doc struct {
		Wall map[string]json.RawMessage `json:"wall"`
	}
	if err := json.Unmarshal(fixture, &doc); err != nil {
		return fmt.Errorf("wall: %w", err)
	}
	// pipeline.Wall.ComputeDigest marshals the wall with an empty digest.
	doc.Wall["digest"] = json.RawMessage(`""`)
	raw, err := json.Marshal(doc.Wall)
	if err != nil {
		return fmt.Errorf("wall.digest: %w", err)
	}
	canon, err := kernel.Canonical(raw)
	if err != nil {
		return fmt.Errorf("wall.digest: %w", err)
	}
	sum := sha256.Sum256(canon)
	if got := hex.EncodeToString(sum[:]); got != digest {
		return fmt.Errorf("wall.digest: %s does not match the wall's content (%s): the wall was changed after it was recorded", digest, got)
	}
	return nil
}

// LoadFixture reads and validates one fixture file.
func LoadFixture(path string) (*Fixture, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read fixture: %w", err)
	}
	f, err := ParseFixture(b)
	if err != nil {
		return nil, fmt.Errorf("fixture %s: %w", path, err)
	}
	if want := strings.TrimSuffix(filepath.Base(path), ".json"); f.ID != want {
		return nil, fmt.Errorf("fixture %s: id: %q does not match the file name (want %q)", path, f.ID, want)
	}
	return f, nil
}

// LoadDir reads every fixture (*.json except manifest.json) in dir, sorted
// by id. Any bad fixture fails the whole load: a suite that silently skips
// cases would score a different suite than the one committed.
func LoadDir(dir string) ([]*Fixture, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("read fixture folder: %w", err)
	}
	var out []*Fixture
	ids := map[string]string{}
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || !strings.HasSuffix(name, ".json") || name == ManifestFile || strings.HasPrefix(name, ".") {
			continue
		}
		f, err := LoadFixture(filepath.Join(dir, name))
		if err != nil {
			return nil, err
		}
		if prev, dup := ids[f.ID]; dup {
			return nil, fmt.Errorf("fixture %s: id %q already used by %s", name, f.ID, prev)
		}
		ids[f.ID] = name
		out = append(out, f)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("fixture folder %s: no fixtures (*.json) found", dir)
	}
	if err := checkManifest(dir, ids); err != nil {
		return nil, err
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, nil
}

// checkManifest holds the folder to its manifest, when it has one: every
// fixture the manifest lists (drilled or hand-made) is in the folder, and
// nothing else is. A deleted fixture (say, one a supervisor gets wrong) or
// a stray one would otherwise score, and pass a baseline's gate, as a
// different suite than the one recorded. A folder without a manifest is a
// hand-assembled one and is taken as it is.
func checkManifest(dir string, loaded map[string]string) error {
	m, err := ReadManifest(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	path := filepath.Join(dir, ManifestFile)
	listed := map[string]bool{}
	for _, id := range append(append([]string(nil), m.Fixtures...), m.HandMade...) {
		if listed[id] {
			return fmt.Errorf("manifest %s: fixture %q is listed twice", path, id)
		}
		listed[id] = true
		if _, ok := loaded[id]; !ok {
			return fmt.Errorf("manifest %s: fixture %q is listed but %s is not in the folder (a suite missing a case scores a different suite)", path, id, id+".json")
		}
	}
	var extra []string
	for id := range loaded {
		if !listed[id] {
			extra = append(extra, loaded[id])
		}
	}
	if len(extra) > 0 {
		sort.Strings(extra)
		return fmt.Errorf("manifest %s: %s not listed under fixtures or hand_made (remove it, or list it in the manifest)", path, strings.Join(extra, ", "))
	}
	return nil
}
