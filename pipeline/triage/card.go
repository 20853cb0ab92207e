package triage

import (
	"fmt"
	"io"
	"strings"

	"github.com/seed-7bc021c3/reckon/kernel"
)

// RenderCard writes a verdict card for the terminal: the integrated
// conclusion of one supervisor.verdict and, when given, the
// operation.reconciled events it wrote (matched by operation id). It is
// plain text, 80 columns wide, so it reads the same in a log or a pipe.
func RenderCard(w io.Writer, verdict kernel.Event, reconciled []kernel.Event) error {
	var v kernel.Verdict
	if err := verdict.DecodeData(&v); err != nil {
		return err
	}
	byOp := map[string]kernel.Reconciliation{}
	for _, e := range reconciled {
		var d kernel.Reconciliation
		if e.Type == kernel.TypeOperationReconciled && e.DecodeData(&d) == nil {
			byOp[d.OperationID] = d
		}
	}
	var b strings.Builder
	rule := strings.Repeat("─", 78)
	part := ""
	if v.Parts > 1 {
		part = fmt.Sprintf("  (part %d of %d)", v.Part, v.Parts)
	}
	fmt.Fprintf(&b, "┌%s\n", rule)
	fmt.Fprintf(&b, "│ SUPERVISOR VERDICT  %s / %s%s\n", kernel.Printable(verdict.Project), kernel.Printable(verdict.RunID), part)
	model := v.Model
	if model == "" {
		model = "-"
	}
	fmt.Fprintf(&b, "│ supervisor %s · model %s · prompt %s · wall %s\n", v.Supervisor, model, v.PromptVersion, short(v.WallDigest))
	if v.SettlePolicy != "" {
		fmt.Fprintf(&b, "│ settlement policy %s\n", v.SettlePolicy)
	}
	fmt.Fprintf(&b, "│ at %s · event %s\n", verdict.TS.UTC().Format("2006-01-02 15:04:05Z"), verdict.Key())
	attn := "no"
	if v.NeedsAttention {
		attn = "YES — an operator should look"
	}
	fmt.Fprintf(&b, "│ needs attention: %s\n", attn)
	fmt.Fprintf(&b, "├%s\n", rule)
	fmt.Fprintf(&b, "│ %-20s %-9s %s\n", "OPERATION", "EFFECT", "BASIS")
	for _, id := range v.OperationIDs {
		d, ok := byOp[id]
		if !ok {
			fmt.Fprintf(&b, "│ %-20s %-9s %s\n", kernel.Printable(id), "?", "(reconciliation not shown)")
			continue
		}
		basis := d.Basis
		if d.ProposedEffect != "" {
			basis += " (proposed " + d.ProposedEffect + ", held for an operator)"
		}
		fmt.Fprintf(&b, "│ %-20s %-9s %s\n", kernel.Printable(id), d.Effect, basis)
		for _, line := range wrap(d.Note, 72) {
			fmt.Fprintf(&b, "│     %s\n", line)
		}
	}
	if len(v.Causes) > 0 || len(v.Remedies) > 0 || v.Lesson != "" {
		fmt.Fprintf(&b, "├%s\n", rule)
	}
	list := func(title string, items []string) {
		if len(items) == 0 {
			return
		}
		fmt.Fprintf(&b, "│ %s\n", title)
		for _, it := range items {
			for i, line := range wrap(it, 72) {
				lead := " • "
				if i > 0 {
					lead = "   "
				}
				fmt.Fprintf(&b, "│%s%s\n", lead, line)
			}
		}
	}
	list("causes", v.Causes)
	list("remedies", v.Remedies)
	if v.Lesson != "" {
		fmt.Fprintf(&b, "│ lesson\n")
		for _, line := range wrap(v.Lesson, 74) {
			fmt.Fprintf(&b, "│   %s\n", line)
		}
	}
	fmt.Fprintf(&b, "└%s\n", rule)
	_, err := io.WriteString(w, b.String())
	return err
}

// wrap breaks s into lines of about width runes. Notes, causes, remedies
// and lessons are a supervisor's text, which may quote what agents wrote
// (a model repeating an error message, a probe detail naming a file an
// agent's command created): a word holding a control character (an escape
// sequence that could move the cursor and overwrite the card's effect and
// basis columns on the operator's terminal) is printed quoted.
func wrap(s string, width int) []string {
	var lines []string
	cur := ""
	for _, word := range strings.Fields(s) {
		word = kernel.Printable(word)
		if cur != "" && len([]rune(cur))+1+len([]rune(word)) > width {
			lines = append(lines, cur)
			cur = ""
		}
		if cur != "" {
			cur += " "
		}
		cur += word
	}
	if cur != "" {
		lines = append(lines, cur)
	}
	return lines
}
