package triage

import (
	"bytes"
	"context"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/seed-7bc021c3/reckon/kernel"
	"github.com/seed-7bc021c3/reckon/kernel/operations"
	"github.com/seed-7bc021c3/reckon/pipeline"
	"github.com/seed-7bc021c3/reckon/pipeline/probe"
	"github.com/seed-7bc021c3/reckon/pipeline/supervisor"
)

// hugeProbe is a probe whose evidence is ~200 KiB: a detail of 150 KiB
// (half of it characters JSON escapes to six bytes) and a provenance with
// one 60 KiB field beside small ones. Its finding per operation is given.
type hugeProbe struct{ findings map[string]string }

func (hugeProbe) Name() string { return "test.huge" }

func (p hugeProbe) Probe(_ context.Context, _ probe.Run, op pipeline.WallOperation) (pipeline.Evidence, bool) {
	f, ok := p.findings[op.OperationID]
	if !ok {
		return pipeline.Evidence{}, false
	}
	prov, _ := json.Marshal(map[string]any{
		"digest":  "sha256:abc",
		"listing": strings.Repeat("x", 60<<10),
		"paths":   []string{"a.txt", "b.txt"},
	})
	return pipeline.Evidence{
		Probe: "test.huge", Finding: f,
		Detail:     "changed: " + strings.Repeat("report-<n>.txt, ", 150<<10/16),
		Provenance: prov, ObservedAt: time.Unix(1_800_000_000, 0).UTC(),
		// A store's change carrying the call's own id: what a probe
		// not in pipeline's table needs for occurred.
		Preconditions: &pipeline.Preconditions{Store: &pipeline.Store{Server: "test", CallUnique: "the call's id"}},
	}, true
}

// An operation whose probe evidence is far over the reconciliation's cap
// is still journaled, as its finding says — settled when the finding is a
// proof, queued for an operator when it is not — with its evidence cut
// under the cap, visibly. Before the bound the record step refused the
// evidence and the wall failed again on every sweep.
func TestOversizedEvidenceIsTrimmedNotFatal(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.seedRun("run-1", opSpec{id: "op-1", outcome: "uncertain"}, opSpec{id: "op-2", outcome: "uncertain"})
	hp := hugeProbe{findings: map[string]string{"op-1": pipeline.FindingOccurred, "op-2": pipeline.FindingInconclusive}}
	raw, _ := hp.Probe(context.Background(), probe.Run{}, pipeline.WallOperation{OperationID: "op-1"})
	if n := jsonSize(raw); n < 200<<10 {
		t.Fatalf("the test probe's evidence is %d bytes, want ~200 KiB", n)
	}
	sw := e.sweeper(Config{Probes: probe.Set{hp}})
	rep, err := sw.Sweep(context.Background(), SweepParams{Project: "acme", RunID: "run-1"})
	// Each operation is a wall of its own: ~64 KiB of evidence is a wall's
	// byte budget (MaxWallBytes).
	if err != nil || rep.Journaled != 2 {
		for _, w := range rep.Walls {
			t.Logf("wall %v: %s %s", w.Operations, w.Outcome, kernel.Abbreviate(w.Error, 300))
		}
		t.Fatalf("sweep: journaled %d walls, want 2: %v", rep.Journaled, err)
	}
	e.drain()
	recs := e.reconciled("run-1")
	want := map[string]struct{ effect, basis string }{
		"op-1": {kernel.EffectOccurred, kernel.BasisProbe},
		"op-2": {kernel.EffectUnknown, kernel.BasisInference},
	}
	for op, w := range want {
		var d kernel.Reconciliation
		if len(recs[op]) != 1 || recs[op][0].DecodeData(&d) != nil || d.Effect != w.effect || d.Basis != w.basis {
			t.Fatalf("%s: %+v, want effect %s basis %s", op, d, w.effect, w.basis)
		}
		if len(d.Evidence) > operations.MaxEvidenceBytes {
			t.Fatalf("%s: evidence is %d bytes, over %d", op, len(d.Evidence), operations.MaxEvidenceBytes)
		}
		var ev reconcileEvidence
		if err := json.Unmarshal(d.Evidence, &ev); err != nil || len(ev.Probes) != 1 {
			t.Fatalf("%s: evidence %v: %.300s", op, err, d.Evidence)
		}
		p := ev.Probes[0]
		if p.Probe != "test.huge" || p.Finding != hp.findings[op] {
			t.Fatalf("%s: probe %q finding %q, want test.huge %s", op, p.Probe, p.Finding, hp.findings[op])
		}
		if !strings.HasPrefix(p.Detail, "changed: report-<n>.txt") || !strings.Contains(p.Detail, "bytes of this detail cut by triage") {
			t.Fatalf("%s: the detail's cut is not visible: …%s", op, p.Detail[max(0, len(p.Detail)-200):])
		}
		var prov map[string]json.RawMessage
		if err := json.Unmarshal(p.Provenance, &prov); err != nil {
			t.Fatal(err)
		}
		if _, ok := prov["listing"]; ok || !bytes.Contains(prov[trimNoteKey], []byte(`"listing":`)) || string(prov["digest"]) != `"sha256:abc"` {
			t.Fatalf("%s: provenance %s: want listing dropped with a note, digest kept", op, p.Provenance)
		}
	}
	attention := map[string]bool{}
	for _, v := range e.runVerdicts("run-1") {
		for _, op := range v.OperationIDs {
			attention[op] = v.NeedsAttention
		}
	}
	if len(attention) != 2 || attention["op-1"] || !attention["op-2"] {
		t.Fatalf("verdicts' needs_attention by operation: %v, want op-1 settled and op-2 queued", attention)
	}
	if left := e.unsettled("run-1"); len(left) != 0 {
		t.Fatalf("unsettled after the sweep: %v", left)
	}
}

// The bound keeps every item's probe and finding, fits the budget whatever
// the escaping, gives small items all they have, and is deterministic.
func TestBoundEvidence(t *testing.T) {
	t.Parallel()
	at := time.Unix(1_800_000_000, 0).UTC()
	recheck := at.Add(time.Minute)
	prov, _ := json.Marshal([]string{strings.Repeat("y", 40<<10)})
	answered := &pipeline.Preconditions{Answered: true}
	evs := []pipeline.Evidence{
		{Probe: "a", Finding: pipeline.FindingNone, Detail: "small", ObservedAt: at, Preconditions: answered},
		{Probe: "b", Finding: pipeline.FindingNone, Detail: strings.Repeat("<>&\u2028", 30<<10), Provenance: prov, ObservedAt: at, Preconditions: answered},
		{Probe: "c", Finding: pipeline.FindingInconclusive, Detail: strings.Repeat("é", 50<<10), ObservedAt: at, RecheckAfter: &recheck},
	}
	for _, budget := range []int{wallEvidenceBudget, 8 << 10, 2 << 10} {
		got := boundEvidence(evs, budget)
		if n := jsonSize(got); n > budget {
			t.Fatalf("budget %d: %d bytes", budget, n)
		}
		if again := boundEvidence(evs, budget); !reflect.DeepEqual(again, got) {
			t.Fatalf("budget %d: not deterministic", budget)
		}
		if !reflect.DeepEqual(boundEvidence(got, budget), got) {
			t.Fatalf("budget %d: bounding bounded evidence changed it", budget)
		}
		for i, g := range got {
			if g.Probe != evs[i].Probe || g.Finding != evs[i].Finding || !g.ObservedAt.Equal(at) || !reflect.DeepEqual(g.Preconditions, evs[i].Preconditions) {
				t.Fatalf("budget %d: item %d changed what it is: %+v", budget, i, g)
			}
		}
		if got[0].Detail != "small" || got[2].RecheckAfter == nil || !got[2].RecheckAfter.Equal(recheck) {
			t.Fatalf("budget %d: small item or recheck_after touched: %+v", budget, got)
		}
		if !bytes.Contains(got[1].Provenance, []byte(`"sha256"`)) {
			t.Fatalf("budget %d: non-object provenance not replaced by its note: %s", budget, got[1].Provenance)
		}
		if d := supervisor.ProbeFinding(pipeline.WallOperation{StartedAt: at.Add(-time.Hour), Evidence: got}); d != pipeline.FindingNone {
			t.Fatalf("budget %d: the proof changed: %q", budget, d)
		}
	}
	if small := evs[:1]; &boundEvidence(small, wallEvidenceBudget)[0] != &small[0] {
		t.Fatal("evidence within the budget was copied")
	}
}
