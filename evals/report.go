package evals

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"

	"github.com/seed-7bc021c3/reckon/kernel"
)

// Report file names inside the output folder.
const (
	ReportMarkdownFile = "report.md"
	ReportJSONFile     = "report.json"
	ConfusionChartFile = "confusion.svg"
	reportDirPerm      = 0o755
)

// WriteReports writes report.md, report.json and confusion.svg into dir and
// returns their paths.
func WriteReports(dir string, rep *Report) ([]string, error) {
	if err := os.MkdirAll(dir, reportDirPerm); err != nil {
		return nil, fmt.Errorf("create report folder: %w", err)
	}
	js, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("marshal report.json: %w", err)
	}
	// A fixture's or a model's text with a bidirectional override would
	// reorder the lines of a report.json read in a terminal.
	js = kernel.TerminalJSON(js)
	files := []struct {
		name string
		body []byte
	}{
		{ReportJSONFile, append(js, '\n')},
		{ReportMarkdownFile, []byte(Markdown(rep))},
		{ConfusionChartFile, []byte(ConfusionSVG(rep))},
	}
	var paths []string
	for _, f := range files {
		p := filepath.Join(dir, f.name)
		if err := writeFileAtomic(p, f.body); err != nil {
			return nil, err
		}
		paths = append(paths, p)
	}
	return paths, nil
}

// pct renders a ratio as a percentage, or n/a when undefined.
func pct(v *float64) string {
	if v == nil {
		return "n/a"
	}
	return fmt.Sprintf("%.1f%%", *v*100)
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// scorecardRows is the scorecard as label/value rows, shared by the
// terminal summary and report.md so they never disagree.
func scorecardRows(rep *Report) [][2]string {
	m := rep.Metrics
	na := m.NeedsAttention
	return [][2]string{
		{"settlement policy scored under", orDash(rep.SettlePolicy)},
		{"walls (ok / invalid / errored)", fmt.Sprintf("%d (%d / %d / %d)", m.Walls, m.WallsOK, m.InvalidOutputs, m.Errored)},
		{"operations (truth occurred / none)", fmt.Sprintf("%d (%d / %d)", m.Operations, m.TruthOccurred, m.TruthNone)},
		{"accuracy on decided operations", fmt.Sprintf("%s (%d/%d)", pct(m.Accuracy), m.Correct, m.Decided)},
		{"coverage (not unknown)", fmt.Sprintf("%s (%d/%d)", pct(m.Coverage), m.Decided, m.Operations)},
		{"proof recall (decided where the wall's evidence could decide)", fmt.Sprintf("%s (%d/%d)", pct(m.ProofRecall), m.ProvableDecided, m.Provable)},
		{"unknown where a proof existed / correct abstentions", fmt.Sprintf("%d / %d", m.UnknownWithProof, m.Abstained)},
		{"decided where a person was needed", fmt.Sprintf("%d", m.DecidedWithoutProof)},
		{"unsafe-none (said none, truth occurred)", fmt.Sprintf("%d (%s of truly occurred)", m.UnsafeNone, pct(m.UnsafeNoneRate))},
		{"unsafe-occurred (said occurred, truth none)", fmt.Sprintf("%d (%s of truly none)", m.UnsafeOccurred, pct(m.UnsafeOccurredRate))},
		{"proposed unsafe-none / unsafe-occurred (before settlement)", fmt.Sprintf("%d / %d", m.ProposedUnsafeNone, m.ProposedUnsafeOccurred)},
		{"held as unknown by the settlement policy", fmt.Sprintf("%d", m.Held)},
		{"needs_attention precision", fmt.Sprintf("%s (%d/%d)", pct(na.Precision), na.TruePositives, na.TruePositives+na.FalsePositives)},
		{"needs_attention recall", fmt.Sprintf("%s (%d/%d)", pct(na.Recall), na.TruePositives, na.TruePositives+na.FalseNegatives)},
		{"invalid outputs", fmt.Sprintf("%d", m.InvalidOutputs)},
		{"errored cases", fmt.Sprintf("%d", m.Errored)},
		{"model answers rejected (repaired or not)", fmt.Sprintf("%d", rep.ModelInvalidAnswers)},
		{"tokens (prompt / completion)", fmt.Sprintf("%d / %d", m.Usage.PromptTokens, m.Usage.CompletionTokens)},
		{"latency per wall (mean / p50 / p95 / max)", fmt.Sprintf("%.1f / %.1f / %.1f / %.1f ms", m.Latency.MeanMS, m.Latency.P50MS, m.Latency.P95MS, m.Latency.MaxMS)},
	}
}

// header names the supervisor and the suite.
func header(rep *Report) string {
	s := fmt.Sprintf("supervisor %s (model %s, prompt %s, settlement policy %s) on %s", rep.Supervisor, orDash(rep.Model), orDash(rep.PromptVersion),
		orDash(rep.SettlePolicy), rep.Fixtures)
	if rep.Suite != nil {
		s += fmt.Sprintf(" (suite seed %d", rep.Suite.Seed)
		if n := len(rep.Suite.HandMade); n > 0 {
			s += fmt.Sprintf(", %d hand-made", n)
		}
		s += ")"
	}
	return s
}

// PrintSummary writes the scorecard and the confusion matrix as aligned
// text tables, what `reckon eval` prints.
func PrintSummary(w io.Writer, rep *Report) error {
	var buf bytes.Buffer
	fmt.Fprintln(&buf, header(rep))
	tw := tabwriter.NewWriter(&buf, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "metric\tvalue")
	for _, r := range scorecardRows(rep) {
		fmt.Fprintf(tw, "%s\t%s\n", r[0], r[1])
	}
	tw.Flush()
	fmt.Fprintln(&buf)
	tw = tabwriter.NewWriter(&buf, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "truth \\ said\t%s\t\n", strings.Join(SaidValues, "\t"))
	for _, t := range TruthValues {
		fmt.Fprintf(tw, "%s", t)
		for _, s := range SaidValues {
			fmt.Fprintf(tw, "\t%d", rep.Metrics.Confusion[t][s])
		}
		fmt.Fprintln(tw, "\t")
	}
	tw.Flush()
	_, err := w.Write(buf.Bytes())
	return err
}

// mdEscape keeps free text from breaking a Markdown table row, or a
// terminal or viewer it is read in: a model's note or a fixture's id is
// someone else's text. Newlines become spaces; any other control or format
// character (a carriage return, an escape sequence, a bidirectional
// override) has the text quoted with \u escapes (kernel.Printable); it is
// cut at 300 bytes on a UTF-8 boundary.
func mdEscape(s string) string {
	s = strings.ReplaceAll(s, "\n", " ")
	if len(s) > 300 {
		s = kernel.TruncateUTF8(s, 300) + "…"
	}
	return strings.ReplaceAll(kernel.Printable(s), "|", "\\|")
}

// Markdown renders report.md.
func Markdown(rep *Report) string {
	var b strings.Builder
	m := rep.Metrics
	fmt.Fprintf(&b, "# Supervisor eval: %s\n\n", rep.Supervisor)
	fmt.Fprintf(&b, "- supervisor: `%s`, model `%s`, prompt version `%s`\n", rep.Supervisor, orDash(rep.Model), orDash(rep.PromptVersion))
	fmt.Fprintf(&b, "- settlement policy: `%s` (verdicts are scored as a sweep would journal them; the proposed counts are what the supervisor said before the policy)\n", orDash(rep.SettlePolicy))
	fmt.Fprintf(&b, "- fixtures: `%s`", rep.Fixtures)
	if rep.Suite != nil {
		fmt.Fprintf(&b, " — generated by `%s` (seed %d, %d fixtures)", rep.Suite.GeneratedBy, rep.Suite.Seed, rep.Suite.Count)
		if n := len(rep.Suite.HandMade); n > 0 {
			fmt.Fprintf(&b, " and %d hand-made adversarial fixtures", n)
		}
	}
	fmt.Fprintf(&b, "\n- run at %s, took %.0f ms\n\n", rep.StartedAt.Format("2006-01-02 15:04:05 MST"), rep.DurationMS)

	b.WriteString("## Scorecard\n\n| metric | value |\n|---|---|\n")
	for _, r := range scorecardRows(rep) {
		fmt.Fprintf(&b, "| %s | %s |\n", r[0], r[1])
	}

	b.WriteString("\n## Confusion matrix (operations)\n\n![confusion matrix](" + ConfusionChartFile + ")\n\n")
	fmt.Fprintf(&b, "| truth \\ said | %s |\n|---|%s\n", strings.Join(SaidValues, " | "), strings.Repeat("---:|", len(SaidValues)))
	for _, t := range TruthValues {
		fmt.Fprintf(&b, "| **%s** |", t)
		for _, s := range SaidValues {
			fmt.Fprintf(&b, " %d |", m.Confusion[t][s])
		}
		b.WriteString("\n")
	}
	b.WriteString("\nThe diagonal (occurred→occurred, none→none) is correct. `occurred→none` is unsafe-none " +
		"(a re-issue would duplicate the effect); `none→occurred` is unsafe-occurred (the work is silently dropped). " +
		"`unknown` leaves the operation for a person: an abstention where the wall's evidence could not decide it, a miss where it could " +
		"(proof recall, and the list below); `invalid` means no valid verdict.\n")

	b.WriteString("\n## By scenario\n\n| scenario | walls | ops | accuracy | coverage | proof recall | unsafe-none | unsafe-occurred | proposed unsafe (none / occurred) | attention P / R | invalid / errored |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|\n")
	for _, s := range rep.Scenarios {
		sm := s.Metrics
		fmt.Fprintf(&b, "| %s | %d | %d | %s | %s | %s | %d | %d | %d / %d | %s / %s | %d / %d |\n", s.Scenario, sm.Walls, sm.Operations,
			pct(sm.Accuracy), pct(sm.Coverage), pct(sm.ProofRecall), sm.UnsafeNone, sm.UnsafeOccurred, sm.ProposedUnsafeNone, sm.ProposedUnsafeOccurred,
			pct(sm.NeedsAttention.Precision), pct(sm.NeedsAttention.Recall), sm.InvalidOutputs, sm.Errored)
	}

	var unsafe, wrong, held, missed []string
	for _, c := range rep.Cases {
		for _, op := range c.Operations {
			line := fmt.Sprintf("| %s | %s | %s | %s | %s | %s |", mdEscape(c.ID), mdEscape(op.OperationID), mdEscape(op.Tool), op.Truth, op.Said, mdEscape(op.Note))
			if op.Unsafe != "" {
				unsafe = append(unsafe, line)
			} else if op.Said != SaidUnknown && op.Said != SaidInvalid && !op.Correct {
				wrong = append(wrong, line)
			}
			if op.Said == SaidUnknown && !op.NeedsPerson {
				missed = append(missed, line)
			}
			if op.Proposed != "" && op.ProposedUnsafe != "" {
				held = append(held, fmt.Sprintf("| %s | %s | %s | %s | %s | %s |", mdEscape(c.ID), mdEscape(op.OperationID), mdEscape(op.Tool), op.Truth, op.Proposed, op.ProposedUnsafe))
			}
		}
	}
	b.WriteString("\n## Unsafe verdicts\n\n")
	if len(unsafe) == 0 {
		b.WriteString("None.\n")
	} else {
		b.WriteString("| fixture | operation | tool | truth | said | note |\n|---|---|---|---|---|---|\n")
		b.WriteString(strings.Join(unsafe, "\n") + "\n")
	}
	if len(held) > 0 {
		b.WriteString("\n## Unsafe proposals held back by the settlement policy\n\n" +
			"What the supervisor proposed by inference, without evidence; journaled as `unknown` with `proposed_effect`, for an operator.\n\n" +
			"| fixture | operation | tool | truth | proposed | would have been |\n|---|---|---|---|---|---|\n")
		b.WriteString(strings.Join(held, "\n") + "\n")
	}
	if len(wrong) > 0 {
		b.WriteString("\n## Other wrong verdicts\n\n| fixture | operation | tool | truth | said | note |\n|---|---|---|---|---|---|\n")
		b.WriteString(strings.Join(wrong, "\n") + "\n")
	}
	if len(missed) > 0 {
		b.WriteString("\n## Unknown where a proof existed\n\nThe fixture records that the wall's evidence decides these; the supervisor left them to a person.\n\n" +
			"| fixture | operation | tool | truth | said | note |\n|---|---|---|---|---|---|\n")
		b.WriteString(strings.Join(missed, "\n") + "\n")
	}

	var failed []string
	var fn, fp []string
	for _, c := range rep.Cases {
		if c.Status != StatusOK {
			failed = append(failed, fmt.Sprintf("| %s | %s | %s |", mdEscape(c.ID), c.Status, mdEscape(c.Error)))
		}
		if c.NeedsAttention != nil && *c.NeedsAttention != c.ExpectNeedsAttention {
			if c.ExpectNeedsAttention {
				fn = append(fn, mdEscape(c.ID))
			} else {
				fp = append(fp, mdEscape(c.ID))
			}
		}
	}
	b.WriteString("\n## Invalid outputs and errors\n\n")
	if len(failed) == 0 {
		b.WriteString("None.\n")
	} else {
		b.WriteString("| fixture | status | error |\n|---|---|---|\n" + strings.Join(failed, "\n") + "\n")
	}
	b.WriteString("\n## needs_attention disagreements\n\n")
	if len(fn)+len(fp) == 0 {
		b.WriteString("None.\n")
	} else {
		if len(fn) > 0 {
			fmt.Fprintf(&b, "- missed (expected, not raised): %s\n", strings.Join(fn, ", "))
		}
		if len(fp) > 0 {
			fmt.Fprintf(&b, "- false alarms (raised, not expected): %s\n", strings.Join(fp, ", "))
		}
	}
	b.WriteString("\nDefinitions are in evals/README.md. Per-case detail is in " + ReportJSONFile + ".\n")
	return b.String()
}
