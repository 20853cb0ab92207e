package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"

	"github.com/seed-7bc021c3/reckon/evals"
	"github.com/seed-7bc021c3/reckon/kernel"
	"github.com/seed-7bc021c3/reckon/pipeline"
	"github.com/seed-7bc021c3/reckon/pipeline/supervisor"
	"github.com/seed-7bc021c3/reckon/platform/config"
)

func runEval(ctx context.Context, args []string) error {
	fset := flag.NewFlagSet("eval", flag.ContinueOnError)
	supName := fset.String("supervisor", "builtin", "supervisor to score: builtin | openai (openai reads RECKON_SUPERVISOR_BASE_URL, _API_KEY, _MODEL)")
	fixtures := fset.String("fixtures", "evals/fixtures", "folder of fixture files")
	out := fset.String("out", "", "folder for report.md, report.json and confusion.svg (default <RECKON_DATA_DIR>/eval/<supervisor>)")
	concurrency := fset.Int("concurrency", 1, "walls decided at once (model supervisors)")
	caseTimeout := fset.Duration("case-timeout", 5*time.Minute, "bound on one wall's decision; a case over it is recorded as errored")
	gate := fset.String("gate", "", "baseline file: exit non-zero on any unsafe verdict, invalid or errored case, or accuracy/coverage below it")
	writeBaseline := fset.String("write-baseline", "", "record this run's accuracy and coverage as the new baseline file (refused if the run has unsafe verdicts)")
	quiet := fset.Bool("quiet", false, "no per-case progress lines")
	settle := fset.String("settle", "", "settlement policy to score under: evidence | inference (default RECKON_SUPERVISOR_SETTLE, itself evidence by default)")
	s, err := prologue(fset, args)
	if err != nil {
		return err
	}
	if *supName != supervisor.BuiltinName && *supName != supervisor.OpenAIName {
		return usageErrorf("--supervisor: %q is not builtin or openai", *supName)
	}
	// RECKON_SUPERVISOR_SETTLE is checked with the configuration; a
	// --settle given replaces it and is checked here.
	policy := s.cfg.SupervisorSettle
	if *settle != "" {
		if _, err := supervisor.ParseSettlePolicy(*settle); err != nil {
			return usageErrorf("--settle: %w", err)
		}
		policy = *settle
	}
	// Every flag is checked before the suite is scored: with a model
	// supervisor, scoring is one paid call per wall.
	if *concurrency < 1 {
		return usageErrorf("--concurrency must be at least 1, got %d", *concurrency)
	}
	if *caseTimeout < 0 {
		return usageErrorf("--case-timeout must not be negative (0: no bound), got %s", *caseTimeout)
	}
	var gateBaseline *evals.Baseline
	if *gate != "" {
		if gateBaseline, err = evals.ReadBaseline(*gate); err != nil {
			return fmt.Errorf("--gate: %w", err)
		}
	}
	cfg := s.cfg
	var rejected atomic.Int64
	sup, err := buildSupervisor(*supName, cfg, func(error) { rejected.Add(1) })
	if err != nil {
		return err
	}
	fx, err := evals.LoadDir(*fixtures)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("%w (run from the repository root, or pass --fixtures DIR)", err)
		}
		return err
	}
	outDir := *out
	if outDir == "" {
		outDir = filepath.Join(cfg.DataDir, "eval", sup.Name())
	}

	fmt.Fprintf(os.Stderr, "eval: %d fixtures from %s, supervisor %s, settlement policy %s\n", len(fx), *fixtures, sup.Name(), policy)
	opt := evals.ScoreParams{CaseTimeout: *caseTimeout, Concurrency: *concurrency, Policy: policy}
	if !*quiet {
		opt.Progress = func(done, total int, c evals.CaseResult) {
			line := fmt.Sprintf("[%*d/%d] %-44s %-7s %d ops %8.1f ms", len(fmt.Sprint(total)), done, total, kernel.Printable(c.ID), c.Status, len(c.Operations), c.LatencyMS)
			if c.Error != "" {
				line += "  " + firstLine(c.Error)
			}
			fmt.Fprintln(os.Stderr, line)
		}
	}
	rep, err := evals.Score(ctx, sup, fx, opt)
	if err != nil {
		return err
	}
	rep.Fixtures = *fixtures
	rep.ModelInvalidAnswers = int(rejected.Load())
	if m, err := evals.ReadManifest(*fixtures); err == nil {
		rep.Suite = m
	} else if !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	paths, err := evals.WriteReports(outDir, rep)
	if err != nil {
		return err
	}
	if err := evals.PrintSummary(os.Stdout, rep); err != nil {
		return err
	}
	fmt.Printf("\nreports: %s\n", strings.Join(paths, ", "))
	// The gate first: a run that fails it must not leave a baseline behind
	// that a later gate would then be held to.
	if gateBaseline != nil {
		if err := evals.Gate(rep, gateBaseline); err != nil {
			if *writeBaseline != "" {
				err = fmt.Errorf("%w (baseline %s not written)", err, *writeBaseline)
			}
			return err
		}
		fmt.Printf("gate passed against %s\n", *gate)
	}
	if *writeBaseline != "" {
		bl, err := evals.NewBaseline(rep, "reckon eval "+strings.Join(args, " "), time.Now())
		if err != nil {
			return err
		}
		if err := evals.WriteBaseline(*writeBaseline, bl); err != nil {
			return err
		}
		fmt.Printf("baseline written to %s (accuracy %.4f, coverage %.4f)\n", *writeBaseline, bl.Accuracy, bl.Coverage)
	}
	return nil
}

// buildSupervisor picks the supervisor named on the command line. openai
// needs its endpoint and model from the environment; nothing falls back
// silently to another supervisor.
func buildSupervisor(name string, cfg config.Config, onInvalid func(error)) (pipeline.Supervisor, error) {
	switch name {
	case supervisor.BuiltinName:
		return supervisor.Builtin{}, nil
	case supervisor.OpenAIName:
		if cfg.SupervisorBaseURL == "" || cfg.SupervisorModel == "" {
			return nil, &config.Error{Var: "RECKON_SUPERVISOR_BASE_URL", Problem: "and RECKON_SUPERVISOR_MODEL must be set for --supervisor openai (any OpenAI-compatible endpoint, e.g. http://127.0.0.1:11434/v1 for Ollama)"}
		}
		return supervisor.NewOpenAI(supervisor.OpenAIConfig{BaseURL: cfg.SupervisorBaseURL, APIKey: cfg.SupervisorAPIKey, Model: cfg.SupervisorModel, OnInvalid: onInvalid})
	default:
		return nil, fmt.Errorf("--supervisor: %q is not builtin or openai", name)
	}
}

// firstLine is the first line of an error for a progress line, cut to
// about 160 bytes on a UTF-8 boundary and quoted when it still holds
// control or format characters: a case's error carries text a model or an
// endpoint wrote, whose escape sequences must not reach the terminal.
func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	if len(s) > 160 {
		s = kernel.TruncateUTF8(s, 160) + "…"
	}
	return kernel.Printable(s)
}
