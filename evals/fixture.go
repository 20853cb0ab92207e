// Package evals measures how good supervisor verdicts are. Drills record
// fixtures — the exact wall a supervisor would see plus the ground truth of
// every operation on it, taken from the fault injector's record and the
// kernel's facts, never from the events the supervisor sees, and whether a
// person was needed to decide it — and the scorer runs a supervisor on
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
//
// The truth is the world's, never a rule's: what happened to each
// operation (Truth) and, where it matters, whether the wall's evidence
// could decide it or a person was needed (NeedsPerson). The loader checks
// the format only, so a fixture may say "the probe is wrong here, a person
// is needed" and keeps loading whatever rule a supervisor decides by.
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
	// NeedsPerson maps operation ids to true where the wall's evidence
	// cannot decide the operation — no proof, or one the recorder knows
	// to be wrong — so that a person must; false where a proof on the
	// wall decides it. Absent from fixtures recorded before it (see
	// PersonNeeded).
	NeedsPerson map[string]bool `json:"needs_person,omitempty"`
	// ExpectNeedsAttention is true when a person is needed for at least
	// one operation of the wall: recorded, and when NeedsPerson is given,
	// exactly whether any of it is true.
	ExpectNeedsAttention bool `json:"expect_needs_attention"`
	// Notes explain the scenario to a person reading the fixture (what was
	// faulted, what traps the wall holds). The supervisor never sees them.
	Notes string `json:"notes"`
}

// Decidable reports what the wall's own evidence decides of an operation
// under today's rule, supervisor.Prove (its doc lists what counts as
// evidence). A drill records it as a fixture's NeedsPerson at the time it
// drills; the loader never holds a fixture to it, since a rule may change
// and a recorded truth may not.
func Decidable(op pipeline.WallOperation) (effect string, ok bool) {
	p := supervisor.Prove(op)
	return p.Effect, p.Proven()
}

// PersonNeeded reports whether the wall's evidence could not decide
// operation id, as recorded: NeedsPerson where the fixture has it. A
// fixture recorded before NeedsPerson says only expect_needs_attention:
// false means no operation needed a person; true is taken per operation
// as "unless the wall's evidence proves its recorded truth", the one
// reading that never credits a supervisor for deciding what its evidence
// does not prove.
func (f *Fixture) PersonNeeded(id string) bool {
	if f.NeedsPerson != nil {
		return f.NeedsPerson[id]
	}
	if !f.ExpectNeedsAttention {
		return false
	}
	op, _ := f.Wall.Operation(id)
	e, ok := Decidable(op)
	return !ok || e != f.Truth[id]
}

// Validate checks a fixture's format: version, id, a wall with
// operations, a truth for every operation and none for anything else,
// needs_person naming only operations of the wall, and
// expect_needs_attention saying whether any of it is true. It never holds
// the fixture to a supervisor's rule. The error names the field at fault.
func (f *Fixture) Validate() error {
	if err := f.validateHeader(); err != nil {
		return err
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
	return f.validateNeedsPerson(seen)
}

// validateHeader checks the fields that name the fixture.
func (f *Fixture) validateHeader() error {
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
	return nil
}

// validateNeedsPerson checks needs_person against the wall's operations
// (ops) and expect_needs_attention against it.
func (f *Fixture) validateNeedsPerson(ops map[string]bool) error {
	if f.NeedsPerson == nil {
		return nil
	}
	anyNeeded := false
	for id, needed := range f.NeedsPerson {
		if !ops[id] {
			return fmt.Errorf("needs_person[%q]: not an operation of the wall", id)
		}
		anyNeeded = anyNeeded || needed
	}
	if f.ExpectNeedsAttention != anyNeeded {
		return fmt.Errorf("expect_needs_attention: %v, but needs_person says a person is needed for %s", f.ExpectNeedsAttention,
			map[bool]string{true: "some operation", false: "no operation"}[anyNeeded])
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
