package soak

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/seed-7bc021c3/reckon/kernel"
)

// wallsPerRound is how many runs with unsettled operations each triage
// round adds: enough that a sweep takes a while, so a kill lands mid-way.
const wallsPerRound = 150

// triageKill: each round seeds runs with uncertain operations (as an
// agent reports them), starts `reckon triage` and SIGKILLs it once it has
// enqueued a random number of verdicts — mid-sweep, possibly mid-commit.
// A last sweep runs to its end. Then the journal must hold, for every
// operation, at most one verdict, and every verdict exactly its
// reconciliations.
func (s *soak) triageKill(ctx context.Context, sc *Scenario, budget time.Time) error {
	if err := s.st.startDev(ctx); err != nil {
		return err
	}
	const project = "soak-triage"
	seeded := map[opRef]bool{}
	midway, finishedFirst := []int{}, []int{}
	for round := 1; round <= s.o.Rounds; round++ {
		if time.Now().After(budget) {
			sc.figure("rounds_cut_by_time_limit", s.o.Rounds-round+1)
			break
		}
		n, err := s.seedWalls(ctx, project, round, seeded)
		if err != nil {
			return err
		}
		sc.Acknowledged += int64(n)
		v0, err := s.verdictsEnqueued(ctx, project)
		if err != nil {
			return err
		}
		// Every seeded run is one wall with one verdict: kill at a random
		// point of the sweep over what is pending.
		pending := int64(round*wallsPerRound) - v0
		k := 1 + rand.N(max(pending-1, 1))
		p, err := s.ps.start("triage", []string{"triage", "--project", project, "--json"})
		if err != nil {
			return err
		}
		var v int64
		for !p.exited() && ctx.Err() == nil {
			if v, err = s.verdictsEnqueued(ctx, project); err == nil && v >= v0+int64(k) {
				p.kill()
				break
			}
			sleep(ctx, 5*time.Millisecond)
		}
		p.kill()
		sc.Rounds++
		if v, err = s.verdictsEnqueued(ctx, project); err != nil {
			return err
		}
		if v-v0 < pending {
			midway = append(midway, int(v-v0))
		} else {
			finishedFirst = append(finishedFirst, round)
		}
		s.progress("%s round %d/%d: triage SIGKILLed after it enqueued %d of %d pending walls' verdicts", sc.Name, round, s.o.Rounds, v-v0, pending)
	}
	sc.figure("verdicts_enqueued_before_each_kill", midway)
	sc.figure("rounds_where_the_sweep_ended_before_the_kill", finishedFirst)

	if ctx.Err() != nil {
		return ctx.Err()
	}
	// Sweeps left alone settle what the killed ones left (a sweep decides
	// at most 1000 walls, `reckon triage`'s default budget).
	start := time.Now()
	sweeps := 0
	for ; sweeps < 10; sweeps++ {
		ops, err := s.api.listing(ctx, project)
		if err != nil {
			return fmt.Errorf("listing before a final sweep: %w", err)
		}
		if len(ops) == 0 {
			break
		}
		p, err := s.ps.start("triage", []string{"triage", "--project", project, "--json"})
		if err != nil {
			return err
		}
		select {
		case <-p.done:
		case <-time.After(5 * time.Minute):
			p.kill()
			sc.problem("a final triage sweep did not end within 5 minutes")
		case <-ctx.Done():
			p.kill()
			return ctx.Err()
		}
		if p.exitErr != nil {
			sc.problem("a final triage sweep failed (%v); see its log", p.exitErr)
		}
	}
	sc.figure("final_sweeps", sweeps)
	sc.figure("final_sweeps_seconds", roundS(time.Since(start)))
	checkOutbox(ctx, s.pool, sc, project, 2*time.Minute)
	s.checkVerdicts(ctx, sc, project, seeded)
	return nil
}

// seedWalls ingests wallsPerRound runs, each with one to three operations
// that failed uncertain, under the agent's own source; it returns the
// number of events acknowledged.
func (s *soak) seedWalls(ctx context.Context, project string, round int, seeded map[opRef]bool) (int, error) {
	var evs []kernel.Event
	ts := time.Now().UTC()
	add := func(runID, suffix, typ string, data any) {
		ev, err := kernel.NewEvent(s.agent, runID+"/"+suffix, project, runID, typ, "agent", ts, data)
		if err != nil {
			panic(err)
		}
		evs = append(evs, ev)
	}
	for w := range wallsPerRound {
		runID := fmt.Sprintf("t%03d-w%03d", round, w)
		add(runID, "run/started", kernel.TypeRunStarted, map[string]any{"plan_summary": "soak triage"})
		for j := 1; j <= 1+w%3; j++ {
			op := fmt.Sprintf("op-%d", j)
			seeded[opRef{runID, op}] = true
			add(runID, op+"/started", kernel.TypeToolStarted, map[string]any{"operation_id": op, "tool": "soak.triage"})
			add(runID, op+"/failed", kernel.TypeToolFailed, map[string]any{"operation_id": op, "error_type": "activity_failed",
				"error": "soak: the agent lost its worker during the call", "effect": kernel.EffectUncertain})
		}
		add(runID, "run/failed", kernel.TypeRunFailed, map[string]any{"error": "soak: the agent lost its worker"})
	}
	for i := 0; i < len(evs); i += 500 {
		batch := evs[i:min(i+500, len(evs))]
		deadline := time.Now().Add(2 * time.Minute)
		for {
			res, err := s.api.ingest(ctx, batch)
			if err == nil {
				for _, r := range res {
					if r.Status == kernel.StatusConflict {
						return 0, fmt.Errorf("seed walls: spurious conflict on %s:%s", r.SourceID, r.EventID)
					}
				}
				break
			}
			if refused(err) || time.Now().After(deadline) || ctx.Err() != nil {
				return 0, fmt.Errorf("seed walls: %w", err)
			}
			sleep(ctx, 200*time.Millisecond)
		}
	}
	return len(evs), nil
}

// verdictsEnqueued counts the project's supervisor verdicts in the outbox
// (committed: the sweep writes a wall in one transaction).
func (s *soak) verdictsEnqueued(ctx context.Context, project string) (int64, error) {
	var n int64
	err := s.pool.QueryRow(ctx, `SELECT count(*) FROM kernel_event_outbox
		WHERE event->>'type' = 'supervisor.verdict' AND event->>'project' = $1`, project).Scan(&n)
	return n, err
}

// checkVerdicts checks the project's verdicts in the journal and that the
// last sweep left nothing listed.
func (s *soak) checkVerdicts(ctx context.Context, sc *Scenario, project string, seeded map[opRef]bool) {
	verdicts, reconciled, unsettled := checkVerdictJournal(ctx, s.pool, sc, project, seeded)
	if ops, err := s.api.listing(ctx, project); err != nil {
		sc.problem("final listing: %v", err)
	} else if len(ops) > 0 {
		sc.problem("%d operation(s) still listed after the last sweep", len(ops))
	}
	s.progress("%s: %d operations seeded, %d verdicts, %d reconciled by the supervisor; %d unsettled", sc.Name, len(seeded), verdicts, reconciled, unsettled)
}

// checkVerdictJournal reads the project's verdicts and supervisor
// reconciliations from the journal: an operation named by two verdicts or
// reconciled twice is duplicated; a verdict without the reconciliation of
// each of its operations, or a reconciliation citing a verdict the journal
// lacks, is half of a wall lost. Seeded operations without a
// reconciliation are problems.
func checkVerdictJournal(ctx context.Context, pool *pgxpool.Pool, sc *Scenario, project string, seeded map[opRef]bool) (nVerdicts, nReconciled, unsettled int) {
	note := func(format string, args ...any) {
		if len(sc.Problems) < 40 {
			sc.problem(format, args...)
		}
	}
	type verdict struct {
		run string
		ops []string
	}
	verdicts := map[kernel.EventKey]verdict{}
	rows, err := pool.Query(ctx, `SELECT source_id, event_id, run_id, data FROM journal_events
		WHERE project = $1 AND type = 'supervisor.verdict'`, project)
	if err != nil {
		sc.problem("read verdicts: %v", err)
		return
	}
	for rows.Next() {
		var k kernel.EventKey
		var run string
		var data []byte
		if err := rows.Scan(&k.SourceID, &k.EventID, &run, &data); err != nil {
			rows.Close()
			sc.problem("read verdicts: %v", err)
			return
		}
		var d kernel.Verdict
		if err := json.Unmarshal(data, &d); err != nil {
			note("verdict %s: %v", k, err)
			continue
		}
		verdicts[k] = verdict{run: run, ops: d.OperationIDs}
	}
	rows.Close()

	recs := map[opRef][]kernel.EventKey{} // the verdicts each reconciliation cites
	rows, err = pool.Query(ctx, `SELECT run_id, operation_id, data FROM journal_events
		WHERE project = $1 AND type = 'operation.reconciled' AND actor = 'supervisor'`, project)
	if err != nil {
		sc.problem("read reconciliations: %v", err)
		return
	}
	for rows.Next() {
		var ref opRef
		var data []byte
		if err := rows.Scan(&ref.run, &ref.op, &data); err != nil {
			rows.Close()
			sc.problem("read reconciliations: %v", err)
			return
		}
		var d struct {
			Evidence struct {
				Verdict kernel.EventKey `json:"verdict"`
			} `json:"evidence"`
		}
		_ = json.Unmarshal(data, &d)
		recs[ref] = append(recs[ref], d.Evidence.Verdict)
	}
	rows.Close()

	perOp := map[opRef]int{}
	for k, v := range verdicts {
		for _, op := range v.ops {
			ref := opRef{v.run, op}
			perOp[ref]++
			if !slices.Contains(recs[ref], k) {
				sc.Lost++
				note("verdict %s names %s but no reconciliation of it cites the verdict", k, ref)
			}
		}
	}
	for ref, n := range perOp {
		if n > 1 {
			sc.Duplicated += int64(n - 1)
			note("operation %s has %d supervisor verdicts", ref, n)
		}
	}
	for ref, cited := range recs {
		if len(cited) > 1 {
			sc.Duplicated += int64(len(cited) - 1)
			note("operation %s has %d supervisor reconciliations", ref, len(cited))
		}
		for _, k := range cited {
			if v, ok := verdicts[k]; !ok || v.run != ref.run || !slices.Contains(v.ops, ref.op) {
				sc.Lost++
				note("reconciliation of %s cites verdict %s, which the journal lacks or which does not name it", ref, k)
			}
		}
	}
	for ref := range seeded {
		if len(recs[ref]) == 0 {
			unsettled++
		}
	}
	if unsettled > 0 {
		sc.problem("%d seeded operation(s) have no supervisor reconciliation after the last sweep", unsettled)
	}
	sc.figure("operations_seeded", len(seeded))
	sc.figure("verdicts", len(verdicts))
	sc.figure("supervisor_reconciliations", len(recs))
	return len(verdicts), len(recs), unsettled
}
