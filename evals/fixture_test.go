package evals

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"encoding/xml"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/seed-7bc021c3/reckon/kernel"
	"github.com/seed-7bc021c3/reckon/pipeline"
)

func TestDecidableAndPersonNeeded(t *testing.T) {
	t.Parallel()
	ev := func(findings ...string) pipeline.WallOperation {
		o := op("o", "run_command", "")
		for _, f := range findings {
			o.Evidence = append(o.Evidence, op("o", "", f).Evidence...)
		}
		return o
	}
	cases := []struct {
		op     pipeline.WallOperation
		effect string
		ok     bool
	}{
		{ev(), "", false},
		{ev("inconclusive"), "", false},
		{ev("occurred"), "occurred", true},
		{ev("inconclusive", "none"), "none", true},
		{ev("none", "none"), "none", true},
		{ev("none", "occurred"), "", false},
	}
	for i, c := range cases {
		e, ok := Decidable(c.op)
		if e != c.effect || ok != c.ok {
			t.Errorf("case %d: Decidable = %q,%v want %q,%v", i, e, ok, c.effect, c.ok)
		}
	}
	kernelKey := kernel.EventKey{SourceID: "kernel", EventID: "r/d/started"}
	settledChild := pipeline.WallOperation{OperationID: "d", Tool: "delegate", State: "failed_uncertain", StartedKey: kernelKey,
		Failure:  &pipeline.WallFailure{ErrorType: "delegated_run_failed", Effect: "uncertain", ReportedBy: "kernel"},
		ChildOps: &pipeline.ChildSummary{ChildSummary: kernel.ChildSummary{Total: 2}, ReportedBy: "kernel"}}
	if e, ok := Decidable(settledChild); e != "occurred" || !ok {
		t.Errorf("settled child: %q,%v", e, ok)
	}
	// The same counts from the listing (nobody checked the child ended) or
	// from an agent prove nothing.
	counted := settledChild
	counted.Failure, counted.ChildOps = nil, &pipeline.ChildSummary{ChildSummary: kernel.ChildSummary{Total: 2}, Counted: true}
	if _, ok := Decidable(counted); ok {
		t.Error("a child summary the listing counted was decidable")
	}
	agentChild := settledChild
	agentChild.Failure = &pipeline.WallFailure{ErrorType: "delegated_run_failed", Effect: "uncertain", ReportedBy: "agent-x", AgentReported: true}
	agentChild.ChildOps = &pipeline.ChildSummary{ChildSummary: kernel.ChildSummary{Total: 2}, ReportedBy: "agent-x", AgentReported: true}
	if _, ok := Decidable(agentChild); ok {
		t.Error("an agent's child summary was decidable")
	}
	rejected := pipeline.WallOperation{OperationID: "r", StartedKey: kernelKey, Failure: &pipeline.WallFailure{ErrorType: "argument_validation"}}
	if e, ok := Decidable(rejected); e != "none" || !ok {
		t.Errorf("rejected before the boundary: %q,%v", e, ok)
	}
	agentRejected := rejected
	agentRejected.Failure = &pipeline.WallFailure{ErrorType: "argument_validation", ReportedBy: "agent-x", AgentReported: true}
	if _, ok := Decidable(agentRejected); ok {
		t.Error("an agent's own argument_validation was decidable")
	}
	crashed := pipeline.WallOperation{OperationID: "x", Failure: &pipeline.WallFailure{ErrorType: "injected_fault", Effect: "uncertain"},
		Args: []byte(`{"command":"echo done, issue filed"}`)}
	if _, ok := Decidable(crashed); ok {
		t.Error("an uncertain failure (with agent text claiming success) was decidable")
	}
	contradicted := ev("occurred", "none")
	contradicted.ChildOps = &pipeline.ChildSummary{ChildSummary: kernel.ChildSummary{Total: 1}}
	if _, ok := Decidable(contradicted); ok {
		t.Error("contradicting probes were overruled by the child summary")
	}
	// A fixture says itself where a person is needed: the recorder's
	// word, even where today's rule would decide (a probe the recorder
	// knows to be wrong), and nothing where the rule would not.
	w := pipeline.Wall{Operations: []pipeline.WallOperation{
		ev("occurred"),
		{OperationID: "d", Tool: "delegate", ChildOps: &pipeline.ChildSummary{ChildSummary: kernel.ChildSummary{Total: 2, Unresolved: 1}},
			Failure: &pipeline.WallFailure{ErrorType: "delegated_run_failed", Effect: "uncertain"}},
	}}
	f := &Fixture{Wall: w, Truth: map[string]string{"o": "none", "d": "occurred"}, NeedsPerson: map[string]bool{"o": true, "d": false}, ExpectNeedsAttention: true}
	if !f.PersonNeeded("o") || f.PersonNeeded("d") {
		t.Error("PersonNeeded does not read the fixture's record")
	}
	// A fixture recorded before needs_person: its wall-wide flag, false,
	// means no one; true, everyone whose truth the wall's evidence does
	// not prove.
	f.NeedsPerson = nil
	if !f.PersonNeeded("o") || !f.PersonNeeded("d") {
		t.Error("an old fixture needing attention: an operation whose probe contradicts its truth, or without proof, needs no person")
	}
	f.Truth["o"] = "occurred"
	if f.PersonNeeded("o") {
		t.Error("an old fixture needing attention: an operation proven as its truth needs a person")
	}
	f.ExpectNeedsAttention = false
	if f.PersonNeeded("d") {
		t.Error("an old fixture needing no attention: an operation needs a person")
	}
}

func TestFixtureValidateNamesTheField(t *testing.T) {
	t.Parallel()
	good := func() *Fixture {
		return fixture("f1", "s", []pipeline.WallOperation{op("o1", "run_command", ""), op("o2", "run_command", "none")}, "occurred", "none")
	}
	if err := good().Validate(); err != nil {
		t.Fatalf("good fixture rejected: %v", err)
	}
	// The loader checks the format, never agreement with a supervisor's
	// rule: a person may be needed where a probe decides (the recorder
	// knows the probe is wrong), and a fixture recorded before
	// needs_person keeps its word whatever today's rule decides.
	wrongProbe := good()
	wrongProbe.NeedsPerson["o2"] = true
	unrecorded := good()
	unrecorded.NeedsPerson, unrecorded.ExpectNeedsAttention = nil, false
	for _, f := range []*Fixture{wrongProbe, unrecorded} {
		if err := f.Validate(); err != nil {
			t.Errorf("a fixture was held to a rule: %v", err)
		}
	}
	for _, id := range []string{"manifest", ".hidden", "a\u200bb", "a\x1bb"} {
		f := good()
		f.ID = id
		if err := f.Validate(); err == nil || !strings.Contains(err.Error(), "id:") {
			t.Errorf("id %q: %v, want an id error (it names the file beside manifest.json)", id, err)
		}
	}
	// The digest: a fixture written with the sweep's digest loads; the
	// same file with its wall edited does not, nor can it be written.
	digested := good()
	digested.Wall.Digest, _ = digested.Wall.ComputeDigest()
	dir := t.TempDir()
	path, err := WriteFixture(dir, digested)
	if err != nil {
		t.Fatalf("fixture with its digest rejected: %v", err)
	}
	if _, err := LoadFixture(path); err != nil {
		t.Fatalf("fixture with its digest does not load: %v", err)
	}
	b, _ := os.ReadFile(path)
	edited := bytes.Replace(b, []byte(`"tool": "run_command"`), []byte(`"tool": "mcp__create_issue"`), 1)
	if _, err := ParseFixture(edited); err == nil || !strings.Contains(err.Error(), "wall.digest") {
		t.Errorf("edited wall: %v, want a wall.digest error", err)
	}
	// Content added to the stored wall after recording breaks the digest.
	extra := bytes.Replace(b, []byte(`"parts": 1,`), []byte(`"parts": 1, "future_field": {"b": 2, "a": 1},`), 1)
	if err := checkStoredDigest(extra, digested.Wall.Digest); err == nil {
		t.Error("a wall with content added after recording kept its digest")
	}
	// A field pipeline.Wall has but the wall lacked when it was recorded
	// (parts, as if added to the type later) does not disturb the stored
	// digest, although re-marshalling the decoded wall would.
	older := bytes.Replace(b, []byte(`"parts": 1,`), nil, 1)
	var doc struct {
		Wall map[string]json.RawMessage `json:"wall"`
	}
	if err := json.Unmarshal(older, &doc); err != nil {
		t.Fatal(err)
	}
	doc.Wall["digest"] = json.RawMessage(`""`)
	raw, _ := json.Marshal(doc.Wall)
	canon, err := kernel.Canonical(raw)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(canon)
	olderDigest := hex.EncodeToString(sum[:])
	older = bytes.Replace(older, []byte(digested.Wall.Digest), []byte(olderDigest), 1)
	of, err := ParseFixture(older)
	if err != nil {
		t.Fatalf("a wall recorded before a field existed no longer loads: %v", err)
	}
	if d, _ := of.Wall.ComputeDigest(); d == olderDigest {
		t.Fatal("test is vacuous: re-marshalling the older wall gives the same digest")
	}
	digested.Wall.Operations[0].Tool = "mcp__create_issue"
	if _, err := WriteFixture(dir, digested); err == nil || !strings.Contains(err.Error(), "wall.digest") {
		t.Errorf("writing a wall whose digest does not match: %v", err)
	}
	cases := []struct {
		name string
		mut  func(f *Fixture)
		want string
	}{
		{"version", func(f *Fixture) { f.Version = 2 }, "version"},
		{"id", func(f *Fixture) { f.ID = "" }, "id: missing"},
		{"id slash", func(f *Fixture) { f.ID = "a/b" }, "id:"},
		{"scenario", func(f *Fixture) { f.Scenario = "" }, "scenario"},
		{"empty wall", func(f *Fixture) { f.Wall.Operations = nil }, "wall.operations: empty"},
		{"dup op", func(f *Fixture) { f.Wall.Operations[1].OperationID = "o1" }, "appears twice"},
		{"missing truth", func(f *Fixture) { delete(f.Truth, "o2") }, `truth: no entry for operation "o2"`},
		{"extra truth", func(f *Fixture) { f.Truth["zz"] = "none" }, `truth["zz"]: not an operation`},
		{"bad truth", func(f *Fixture) { f.Truth["o1"] = "unknown" }, `truth["o1"]`},
		{"attention", func(f *Fixture) { f.ExpectNeedsAttention = false }, "expect_needs_attention"},
		{"needs_person of no operation", func(f *Fixture) { f.NeedsPerson["zz"] = true }, `needs_person["zz"]: not an operation`},
	}
	for _, c := range cases {
		f := good()
		c.mut(f)
		err := f.Validate()
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want error containing %q", c.name, err, c.want)
		}
	}
}

func TestFixtureRoundTripAndLoadDir(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, f := range threeWalls() {
		f.Seed, f.GeneratedBy, f.Notes = 7, "reckon drill --seed 7", "hand-built for a test"
		if _, err := WriteFixture(dir, f); err != nil {
			t.Fatal(err)
		}
	}
	if err := WriteManifest(dir, Manifest{Version: 1, Seed: 7, Count: 3, GeneratedBy: "reckon drill --seed 7", Fixtures: []string{"a", "b", "c"}}); err != nil {
		t.Fatal(err)
	}
	got, err := LoadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 || got[0].ID != "a" || got[2].ID != "c" {
		t.Fatalf("LoadDir = %d fixtures", len(got))
	}
	if got[1].Truth["b3"] != "occurred" || got[1].Wall.Operations[0].Evidence[0].Finding != "occurred" || got[0].Seed != 7 {
		t.Errorf("round trip lost data: %+v", got[1])
	}
	m, err := ReadManifest(dir)
	if err != nil || m.Seed != 7 || m.Count != 3 {
		t.Fatalf("manifest = %+v, %v", m, err)
	}
	// Written bytes are stable: writing again gives the same file.
	b1, _ := os.ReadFile(filepath.Join(dir, "a.json"))
	if _, err := WriteFixture(dir, got[0]); err != nil {
		t.Fatal(err)
	}
	b2, _ := os.ReadFile(filepath.Join(dir, "a.json"))
	if !bytes.Equal(b1, b2) {
		t.Error("rewriting a loaded fixture changed its bytes")
	}

	// An unknown field, a renamed file and a broken fixture each fail the load.
	bad := t.TempDir()
	os.WriteFile(filepath.Join(bad, "a.json"), bytes.Replace(b1, []byte(`"notes"`), []byte(`"note"`), 1), 0o644)
	if _, err := LoadDir(bad); err == nil || !strings.Contains(err.Error(), "unknown field") {
		t.Errorf("unknown field: %v", err)
	}
	renamed := t.TempDir()
	os.WriteFile(filepath.Join(renamed, "zz.json"), b1, 0o644)
	if _, err := LoadDir(renamed); err == nil || !strings.Contains(err.Error(), "does not match the file name") {
		t.Errorf("renamed: %v", err)
	}
	if _, err := LoadDir(t.TempDir()); err == nil {
		t.Error("empty folder loaded")
	}
	invalid := fixture("x", "s", []pipeline.WallOperation{op("o1", "run_command", "")}, "none")
	invalid.Truth["o1"] = "maybe"
	if _, err := WriteFixture(t.TempDir(), invalid); err == nil {
		t.Error("WriteFixture wrote an invalid fixture")
	}
}

func TestReportsAreWrittenAndReadable(t *testing.T) {
	t.Parallel()
	sup := &scripted{answers: map[string]pipeline.Decision{
		"a": attention(v("a1", "occurred", "probe"), v("a2", "none", "inference")),
		"b": calm(v("b1", "occurred", "probe"), v("b2", "occurred", "inference"), v("b3", "none", "inference")),
		"c": attention(v("c1", "none", "probe"), v("c2", "unknown", "inference")),
	}}
	rep, err := Score(t.Context(), sup, threeWalls(), ScoreParams{Policy: "inference"})
	if err != nil {
		t.Fatal(err)
	}
	rep.Fixtures = "testdata<&>"
	dir := t.TempDir()
	paths, err := WriteReports(dir, rep)
	if err != nil {
		t.Fatal(err)
	}
	if len(paths) != 3 {
		t.Fatalf("paths = %v", paths)
	}
	svg, _ := os.ReadFile(filepath.Join(dir, ConfusionChartFile))
	dec := xml.NewDecoder(bytes.NewReader(svg))
	texts := []string{}
	for {
		tok, err := dec.Token()
		if err != nil {
			if !errors.Is(err, io.EOF) {
				t.Fatalf("confusion.svg is not well-formed XML: %v", err)
			}
			break
		}
		if cd, ok := tok.(xml.CharData); ok {
			texts = append(texts, string(cd))
		}
	}
	all := strings.Join(texts, "|")
	for _, want := range []string{"supervisor scripted", "UNSAFE-NONE", "UNSAFE-OCCURRED", "testdata<&>", "|2|", "truth"} {
		if !strings.Contains(all, want) {
			t.Errorf("confusion.svg text lacks %q", want)
		}
	}
	md, _ := os.ReadFile(filepath.Join(dir, ReportMarkdownFile))
	for _, want := range []string{"| accuracy on decided operations | 66.7% (4/6) |", "| unsafe-none (said none, truth occurred) | 1 (25.0% of truly occurred) |",
		"| b | b3 | run_command | occurred | none |", "| **occurred** | 2 | 1 | 1 | 0 |", "missed (expected, not raised): b", "false alarms (raised, not expected): c",
		"| proposed unsafe-none / unsafe-occurred (before settlement) | 1 / 1 |", "settlement policy: `inference`"} {
		if !strings.Contains(string(md), want) {
			t.Errorf("report.md lacks %q", want)
		}
	}
	js, _ := os.ReadFile(filepath.Join(dir, ReportJSONFile))
	for _, want := range []string{`"unsafe_none": 1`, `"accuracy": 0.6666666666666666`} {
		if !strings.Contains(string(js), want) {
			t.Errorf("report.json lacks %s", want)
		}
	}
	if strings.Contains(string(js), `"said": "invalid"`) {
		t.Error("report.json has invalid verdicts although all were valid")
	}
	var buf bytes.Buffer
	if err := PrintSummary(&buf, rep); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"supervisor scripted", "coverage (not unknown)", "85.7% (6/7)", "needs_attention recall"} {
		if !strings.Contains(buf.String(), want) {
			t.Errorf("summary lacks %q:\n%s", want, buf.String())
		}
	}
}

func TestHSLHex(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		h, s, l float64
		want    string
	}{{0, 1, 0.5, "#ff0000"}, {120, 1, 0.5, "#00ff00"}, {240, 1, 0.5, "#0000ff"}, {0, 0, 1, "#ffffff"}, {280, 0.65, 0.97, "#f9f2fc"}} {
		if got := hslHex(c.h, c.s, c.l); got != c.want {
			t.Errorf("hslHex(%v,%v,%v) = %s, want %s", c.h, c.s, c.l, got, c.want)
		}
	}
}

// TestParseFixtureRefusesDuplicateKeys: a fixture whose JSON repeats a key
// is ambiguous (encoding/json lets the last win, or merges a repeated
// object into the first), so it is refused with the path of the key. A
// repeated "wall": null after a wall with a digest fails the load rather
// than panic the loader (nil map in the digest check).
func TestParseFixtureRefusesDuplicateKeys(t *testing.T) {
	t.Parallel()
	f := fixture("f1", "s", []pipeline.WallOperation{op("o1", "run_command", "none")}, "none")
	f.Wall.Digest, _ = f.Wall.ComputeDigest()
	b, err := f.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ParseFixture(b); err != nil {
		t.Fatalf("good fixture: %v", err)
	}
	end := bytes.LastIndexByte(b, '}')
	for name, c := range map[string]struct{ extra, want string }{
		"null wall":       {`, "wall": null`, "wall"},
		"second truth":    {`, "truth": {"o1": "occurred"}`, "truth"},
		"truth key twice": {"", "o1"},
	} {
		var doc []byte
		if c.extra != "" {
			doc = append(append(append([]byte(nil), b[:end]...), c.extra...), b[end:]...)
		} else {
			doc = bytes.Replace(b, []byte(`"o1": "none"`), []byte(`"o1": "occurred", "o1": "none"`), 1)
		}
		func() {
			defer func() {
				if r := recover(); r != nil {
					t.Errorf("%s: ParseFixture panicked: %v", name, r)
				}
			}()
			if _, err := ParseFixture(doc); err == nil || !strings.Contains(err.Error(), "appears twice") || !strings.Contains(err.Error(), c.want) {
				t.Errorf("%s: %v, want an error naming the duplicate %s", name, err, c.want)
			}
		}()
	}
}

// TestLoadDirHoldsTheFolderToItsManifest: a suite folder with a manifest
// loads only when it holds exactly the fixtures the manifest lists: a
// deleted fixture must not load as a smaller suite whose scores still
// pass the gate of the full suite's baseline (drop the walls a supervisor
// gets wrong, and it passes), nor a stray file score as part of the suite.
func TestLoadDirHoldsTheFolderToItsManifest(t *testing.T) {
	t.Parallel()
	write := func(t *testing.T, m Manifest, ids ...string) string {
		dir := t.TempDir()
		for _, f := range threeWalls() {
			if slices.Contains(ids, f.ID) {
				f.GeneratedBy = "test"
				if _, err := WriteFixture(dir, f); err != nil {
					t.Fatal(err)
				}
			}
		}
		if err := WriteManifest(dir, m); err != nil {
			t.Fatal(err)
		}
		return dir
	}
	m := Manifest{Version: 1, Count: 2, Fixtures: []string{"a", "b"}, HandMade: []string{"c"}}
	if _, err := LoadDir(write(t, m, "a", "b", "c")); err != nil {
		t.Fatalf("complete suite: %v", err)
	}
	for name, c := range map[string]struct {
		ids  []string
		m    Manifest
		want string
	}{
		"drilled fixture missing":   {[]string{"b", "c"}, m, `"a" is listed`},
		"hand-made fixture missing": {[]string{"a", "b"}, m, `"c" is listed`},
		"stray fixture":             {[]string{"a", "b", "c"}, Manifest{Version: 1, Count: 2, Fixtures: []string{"a", "b"}}, "c.json not listed"},
		"listed twice":              {[]string{"a", "b", "c"}, Manifest{Version: 1, Count: 3, Fixtures: []string{"a", "b", "c"}, HandMade: []string{"c"}}, "listed twice"},
	} {
		if _, err := LoadDir(write(t, c.m, c.ids...)); err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), ManifestFile) {
			t.Errorf("%s: %v, want an error naming the manifest and %s", name, err, c.want)
		}
	}
	// A malformed manifest fails the load (before any wall is scored).
	dir := write(t, m, "a", "b", "c")
	if err := os.WriteFile(filepath.Join(dir, ManifestFile), []byte(`{"fixtures": "a"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadDir(dir); err == nil || !strings.Contains(err.Error(), ManifestFile) {
		t.Errorf("malformed manifest: %v", err)
	}
}
