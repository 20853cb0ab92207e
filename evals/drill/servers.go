package drill

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/seed-7bc021c3/reckon/evals"
	"github.com/seed-7bc021c3/reckon/internal/sqlitefile"
	"github.com/seed-7bc021c3/reckon/kernel/runner"
	"github.com/seed-7bc021c3/reckon/tool/mcptool"
)

// Real-server suites (docs/evals.md#real-mcp-servers): the drill drives
// third-party npm MCP servers from testdata/npm over a store of each
// run's own, seeded before the run; the faulted write's truth is the fault
// injector's record checked against the store's own diff.
const (
	// SQLiteServer names mcp-sqlite in a drill stack: one SQLite file per
	// run, <DataDir>/sqlite/<run_id>.db.
	SQLiteServer = "sqlite"
	// GitServer names @cyanheads/git-mcp-server in a drill stack: one
	// repository per run, in the run's workspace (repo/).
	GitServer = "git"
)

// The servers' entry points under testdata/npm, for the stack's commands
// and for FindNPMDir's check that they are installed.
var (
	sqliteEntry = filepath.Join("node_modules", "mcp-sqlite", "mcp-sqlite-server.js")
	gitEntry    = filepath.Join("node_modules", "@cyanheads", "git-mcp-server", "dist", "index.js")
)

// npmServers adds mcp-sqlite and git-mcp-server from npmDir (testdata/npm)
// to the stack, with their probe contracts, each store declared
// exclusive (only the run writes it).
func (st *Stack) npmServers(dataDir, npmDir, node string) ([]mcptool.ServerConfig, error) {
	dir := filepath.Join(dataDir, "sqlite")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("drill: sqlite files: %w", err)
	}
	st.npmDir, st.sqliteDir = npmDir, dir
	return []mcptool.ServerConfig{
		{Name: SQLiteServer, Command: []string{node, filepath.Join(npmDir, sqliteEntry), filepath.Join(dir, "{run_id}.db")},
			Exclusive: true, Probes: &mcptool.ProbeSpec{Builtin: "mcp-sqlite"}},
		{Name: GitServer, Command: []string{node, filepath.Join(npmDir, gitEntry)},
			Env:       map[string]string{"GIT_SIGN_COMMITS": "false", "MCP_LOG_LEVEL": "error"},
			Exclusive: true, Probes: &mcptool.ProbeSpec{Builtin: "git-mcp-server"}},
	}, nil
}

// FindNPMDir returns testdata/npm of the repository containing dir (or a
// parent of it) once mcp-sqlite and git-mcp-server are installed there
// (scripts/ensure-deps.sh); "" when they are not.
func FindNPMDir(dir string) string {
	for d := dir; ; d = filepath.Dir(d) {
		npm := filepath.Join(d, "testdata", "npm")
		_, e1 := os.Stat(filepath.Join(npm, sqliteEntry))
		_, e2 := os.Stat(filepath.Join(npm, gitEntry))
		if e1 == nil && e2 == nil {
			return npm
		}
		if parent := filepath.Dir(d); parent == d {
			return ""
		}
	}
}

// seedStore prepares sc's store before its run: the SQLite file, or the
// repository in the run's workspace.
func (st *Stack) seedStore(ctx context.Context, sc Scenario, project string) error {
	switch {
	case sc.SQLite != nil:
		return sc.SQLite.seed(ctx, st.sqliteFile(sc.RunID))
	case sc.Git != nil:
		repo, err := st.gitRepo(project, sc.RunID)
		if err != nil {
			return err
		}
		return sc.Git.seed(ctx, repo)
	}
	return nil
}

// storeTruth checks the faulted write's truth against the store's diff
// (the store after the run against the seed with the earlier writes
// applied, and with the faulted one too).
func (st *Stack) storeTruth(ctx context.Context, sc Scenario, project string, f *evals.Fixture) error {
	var diff string
	var err error
	switch {
	case sc.SQLite != nil:
		diff, err = sc.SQLite.diff(ctx, st.sqliteFile(sc.RunID))
	case sc.Git != nil:
		var repo string
		if repo, err = st.gitRepo(project, sc.RunID); err == nil {
			diff, err = sc.Git.diff(ctx, repo)
		}
	default:
		return nil
	}
	if err != nil {
		return fmt.Errorf("run %s: %w", sc.RunID, err)
	}
	return agreeTruth(sc.RunID, fmt.Sprintf("op-%d", len(sc.Plan.Steps)), "store", diff, f)
}

// providesStore says the stack lacks the npm servers sc drives.
func (st *Stack) providesStore(sc Scenario) error {
	if (sc.SQLite != nil || sc.Git != nil) && st.npmDir == "" {
		return fmt.Errorf("scenario %s needs mcp-sqlite and git-mcp-server (testdata/npm; scripts/ensure-deps.sh)", sc.RunID)
	}
	return nil
}

func (st *Stack) sqliteFile(runID string) sqlitefile.File {
	return sqlitefile.File{Path: filepath.Join(st.sqliteDir, runID+".db")}
}

// gitRepo is the repository of a git drill run: repo/ in its workspace,
// which its plan names as {workspace}/repo. The workspace is the
// kernel's own choice (runner.Starter.Workspace), never a guess beside it.
func (st *Stack) gitRepo(project, runID string) (string, error) {
	ws, err := (&runner.Starter{DataDir: st.Core.Cfg.DataDir}).Workspace(project, runID)
	if err != nil {
		return "", fmt.Errorf("run %s: its workspace: %w", runID, err)
	}
	return filepath.Join(ws, "repo"), nil
}

// agreeTruth checks the faulted operation op's recorded truth against
// diff, what the store's (what's) own diff says, and notes it.
func agreeTruth(runID, op, what, diff string, f *evals.Fixture) error {
	t, ok := f.Truth[op]
	if !ok {
		// A faulted write always has a fault record; without one there is
		// nothing the diff could be checked against, and the fixture would
		// carry an unchecked truth.
		return fmt.Errorf("run %s: no fault record for %s to check against the %s's diff %s", runID, op, what, diff)
	}
	if t != diff {
		return fmt.Errorf("run %s: %s's fault record says %s, the %s's diff %s", runID, op, t, what, diff)
	}
	f.Notes += fmt.Sprintf(" The %s's diff across %s: %s.", what, op, diff)
	return nil
}
