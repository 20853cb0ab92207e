package triage

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"sort"

	"github.com/seed-7bc021c3/reckon/kernel"
	"github.com/seed-7bc021c3/reckon/kernel/operations"
	"github.com/seed-7bc021c3/reckon/pipeline"
)

// Bounding an operation's evidence.
//
// Every operation of a wall is journaled with its probe evidence
// (reconcileEvidence), and operations.ReconcileAllTx refuses evidence over
// operations.MaxEvidenceBytes. Probes are written to stay small, but a
// probe that did not (a detail naming every changed path, a provenance
// holding a whole read-back) would make the wall's record fail on every
// sweep: an operation that could never be settled, nor even queued for an
// operator. So triage bounds each operation's evidence itself, where the
// wall is built (the supervisor decides on what is journaled), and again
// when it records.
//
// What a cut keeps: every evidence item, with its probe, finding,
// observed_at, recheck_after and preconditions untouched — the finding is what decides
// and what validation checks a verdict against, so a proof stays exactly
// the proof it was, an inconclusive stays inconclusive. What it cuts, in
// order, only from items over their share: provenance fields (the largest
// first), replaced by a note naming each dropped field and its size and
// the whole provenance's size and sha256; then the detail, cut at the end
// with a marker saying how many bytes were cut.

// evidenceEnvelopeReserve is the room left, out of MaxEvidenceBytes, for
// what record wraps the probe evidence in: the verdict's key (an event id
// of at most kernel.MaxKeyLen bytes, up to six times that once
// JSON-escaped) and the wall digest.
const evidenceEnvelopeReserve = 6*kernel.MaxKeyLen + 1024

// wallEvidenceBudget bounds the JSON of one operation's probe evidence on
// a wall, so that its reconciliation always fits MaxEvidenceBytes.
const wallEvidenceBudget = operations.MaxEvidenceBytes - evidenceEnvelopeReserve

// trimNoteKey is the provenance field that says what a cut dropped.
const trimNoteKey = "trimmed_by_triage"

// boundEvidence returns evs when their JSON fits budget bytes, otherwise a
// copy cut to fit (see above). The cut is deterministic: the same evidence
// and budget always give the same bytes, so a wall's digest and its
// reconciliations' ids stay stable across sweeps. Items share the budget
// max-min fairly: the smaller ones keep everything, the larger ones split
// what is left equally.
func boundEvidence(evs []pipeline.Evidence, budget int) []pipeline.Evidence {
	if jsonSize(evs) <= budget {
		return evs
	}
	out := slices.Clone(evs)
	sizes := make([]int, len(out))
	order := make([]int, len(out))
	for i := range out {
		sizes[i], order[i] = jsonSize(out[i]), i
	}
	sort.SliceStable(order, func(a, b int) bool { return sizes[order[a]] < sizes[order[b]] })
	left := budget - 2 - (len(out) - 1) // brackets and commas
	for k, i := range order {
		out[i] = trimEvidence(out[i], left/(len(order)-k))
		left -= jsonSize(out[i])
	}
	return out
}

// trimEvidence cuts one evidence item to at most share bytes of JSON where
// it can: provenance first (to half the share, unless the detail leaves it
// more), then the detail. Probe, finding and times are never touched, so an
// item whose fixed fields alone pass share stays over it.
func trimEvidence(e pipeline.Evidence, share int) pipeline.Evidence {
	if jsonSize(e) <= share {
		return e
	}
	if len(e.Provenance) > 0 {
		withoutProv := e
		withoutProv.Provenance = nil
		room := max(share/2, share-jsonSize(withoutProv)-len(`,"provenance":`))
		if jsonSize(e.Provenance) > room {
			e.Provenance = trimProvenance(e.Provenance, room)
		}
	}
	if jsonSize(e) > share {
		e.Detail = cutDetail(e, share)
	}
	return e
}

// trimProvenance drops prov's top-level fields, largest first (ties by
// name), until it fits room bytes, and adds a note naming what was dropped.
// A provenance that is no JSON object, or does not fit with every field
// dropped, is replaced by the note alone.
func trimProvenance(prov json.RawMessage, room int) json.RawMessage {
	sum := sha256.Sum256(prov)
	note := map[string]any{
		"note":   fmt.Sprintf("provenance fields dropped to keep the operation's evidence under %d bytes", operations.MaxEvidenceBytes),
		"bytes":  len(prov),
		"sha256": hex.EncodeToString(sum[:]),
	}
	var fields map[string]json.RawMessage
	if json.Unmarshal(prov, &fields) == nil && fields != nil {
		// A note from an earlier cut stays; its dropped fields join ours.
		dropped := map[string]int{}
		if old, ok := fields[trimNoteKey]; ok {
			var prev struct {
				Dropped map[string]int `json:"dropped_fields"`
			}
			if json.Unmarshal(old, &prev) == nil {
				for k, v := range prev.Dropped {
					dropped[k] = v
				}
			}
			delete(fields, trimNoteKey)
		}
		names := make([]string, 0, len(fields))
		for k := range fields {
			names = append(names, k)
		}
		sort.Slice(names, func(a, b int) bool {
			la, lb := len(fields[names[a]]), len(fields[names[b]])
			if la != lb {
				return la > lb
			}
			return names[a] < names[b]
		})
		for _, k := range names {
			dropped[k] = len(fields[k])
			delete(fields, k)
			note["dropped_fields"] = dropped
			kept := map[string]any{trimNoteKey: note}
			for f, v := range fields {
				kept[f] = v
			}
			if b, err := json.Marshal(kept); err == nil && len(b) <= room {
				return b
			}
		}
	}
	delete(note, "dropped_fields")
	note["note"] = fmt.Sprintf("provenance dropped to keep the operation's evidence under %d bytes", operations.MaxEvidenceBytes)
	b, _ := json.Marshal(map[string]any{trimNoteKey: note})
	return b
}

// cutDetail returns e's detail cut so that e fits share bytes of JSON,
// ending in a marker that says how many bytes were cut ("" left of it when
// even the marker alone does not fit).
func cutDetail(e pipeline.Evidence, share int) string {
	full := e.Detail
	e.Detail = ""
	keep := share - jsonSize(e)
	for {
		if keep < 0 {
			keep = 0
		}
		kept := kernel.TruncateUTF8(full, keep)
		e.Detail = kept + fmt.Sprintf(" … [%d of %d bytes of this detail cut by triage to keep the operation's evidence under %d bytes]",
			len(full)-len(kept), len(full), operations.MaxEvidenceBytes)
		over := jsonSize(e) - share
		if over <= 0 || keep == 0 {
			return e.Detail
		}
		// JSON escaping makes some bytes longer: cut what still overflows.
		keep -= over
	}
}

// jsonSize is the length of v's JSON as encoding/json writes it (a
// marshalling error counts as nothing: evidence always marshals).
func jsonSize(v any) int {
	b, _ := json.Marshal(v)
	return len(b)
}
