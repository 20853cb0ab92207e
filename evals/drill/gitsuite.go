package drill

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// GitKindPrefix starts the scenario kind of a git drill: <write
// tool>_<after|before>, every write tool being git_<verb>.
const GitKindPrefix = "git_"

// gitRepoArg is the repository's path in a git drill's plan: repo/ in
// the run's workspace.
const gitRepoArg = WorkspacePlaceholder + "/repo"

var gitWrites = []string{"git_commit", "git_tag", "git_branch"}

// GitCase is a git scenario's repository: the files made (untracked)
// before the run for its commits to stage, and the writes its plan makes
// in order (tool names as the server's), the last one faulted. The
// repository starts with one commit on main.
type GitCase struct {
	Files  []string
	Writes []Step
}

// gitState is what a git drill compares: the commits on HEAD, the tags
// and the branches.
type gitState struct {
	Commits  int      `json:"commits"`
	Tags     []string `json:"tags"`
	Branches []string `json:"branches"`
}

// GenerateGit returns count git scenarios from seed: each reads the
// repository, makes up to two seeded writes (commits staging a file of
// their own, tags, branches) and then the faulted write, after or before
// its effect; write tool and fault side are dealt as GenerateSQLite deals
// them.
func GenerateGit(seed uint64, count int) []Scenario {
	r := rand.New(rand.NewPCG(seed, seed^0x5851f42d4c957f2d))
	out := make([]Scenario, 0, count)
	var deck []int
	for i := 0; i < count; i++ {
		if len(deck) == 0 {
			deck = r.Perm(2 * len(gitWrites))
		}
		pick := deck[0]
		deck = deck[1:]
		write, after := gitWrites[pick/2], pick%2 == 0
		c := &GitCase{}
		var sc Scenario
		read := Step{Tool: "mcp__" + GitServer + "__git_status", Args: map[string]any{"path": gitRepoArg}}
		if r.IntN(2) == 0 {
			read = Step{Tool: "mcp__" + GitServer + "__git_log", Args: map[string]any{"path": gitRepoArg, "maxCount": 3}}
		}
		sc.Plan.Steps = append(sc.Plan.Steps, read)
		for j, n := 0, r.IntN(3); j <= n; j++ {
			w := write
			if j < n {
				w = gitWrites[r.IntN(len(gitWrites))]
			}
			step := c.write(r, w, i, j)
			c.Writes = append(c.Writes, step)
			sc.Plan.Steps = append(sc.Plan.Steps, Step{Tool: "mcp__" + GitServer + "__" + step.Tool, Args: step.Args})
		}
		id := fmt.Sprintf("op-%d", len(sc.Plan.Steps))
		when := sc.faultAt(id, after)
		sc.Index, sc.Kind, sc.Git = i, write+"_"+when, c
		sc.RunID = fmt.Sprintf("g%d-%03d-%s-%s", seed, i, strings.ReplaceAll(write, "_", "-"), when)
		sc.Notes = fmt.Sprintf("git-mcp-server: a repository with one commit, %d earlier write(s), then %s (%s), fault %s the effect",
			len(c.Writes)-1, write, id, when)
		out = append(out, sc)
	}
	return out
}

// write is one effective write of tool: a commit stages a new file, a tag
// or branch takes a new name.
func (c *GitCase) write(r *rand.Rand, tool string, i, j int) Step {
	noun := nouns[r.IntN(len(nouns))]
	switch tool {
	case "git_commit":
		file := fmt.Sprintf("%s-%d.txt", noun, len(c.Files)+1)
		c.Files = append(c.Files, file)
		return Step{Tool: tool, Args: map[string]any{"path": gitRepoArg, "message": "add " + file, "filesToStage": []any{file}}}
	case "git_tag":
		return Step{Tool: tool, Args: map[string]any{"path": gitRepoArg, "mode": "create", "tagName": fmt.Sprintf("v%d.%d.%d", i, j, r.IntN(10))}}
	default:
		return Step{Tool: tool, Args: map[string]any{"path": gitRepoArg, "mode": "create", "branchName": noun + "-" + strconv.Itoa(j+1)}}
	}
}

// applyGit is s after the write step.
func applyGit(s gitState, step Step) gitState {
	out := gitState{Commits: s.Commits, Tags: append([]string{}, s.Tags...), Branches: append([]string{}, s.Branches...)}
	switch step.Tool {
	case "git_commit":
		out.Commits++
	case "git_tag":
		out.Tags = append(out.Tags, step.Args["tagName"].(string))
	case "git_branch":
		out.Branches = append(out.Branches, step.Args["branchName"].(string))
	}
	sort.Strings(out.Tags)
	sort.Strings(out.Branches)
	return out
}

// seed makes the repository: one empty commit on main, then the case's
// files, untracked.
func (c *GitCase) seed(ctx context.Context, repo string) error {
	if err := os.RemoveAll(repo); err != nil {
		return fmt.Errorf("git seed: %w", err)
	}
	if err := os.MkdirAll(repo, 0o755); err != nil {
		return fmt.Errorf("git seed: %w", err)
	}
	for _, a := range [][]string{{"init", "-q", "-b", "main"}, {"config", "user.email", "drill@example.com"}, {"config", "user.name", "Drill"},
		{"config", "commit.gpgsign", "false"}, {"config", "tag.gpgsign", "false"}, {"commit", "-q", "--allow-empty", "-m", "init"}} {
		if _, err := gitOut(ctx, repo, a...); err != nil {
			return err
		}
	}
	for _, f := range c.Files {
		if err := os.WriteFile(filepath.Join(repo, f), []byte(f+"\n"), 0o644); err != nil {
			return fmt.Errorf("git seed: %w", err)
		}
	}
	return nil
}

// diff says what the repository shows of the last write, as
// SQLiteCase.diff does for a SQLite file.
func (c *GitCase) diff(ctx context.Context, repo string) (string, error) {
	got, err := observeGit(ctx, repo)
	if err != nil {
		return "", err
	}
	s := gitState{Commits: 1, Tags: []string{}, Branches: []string{"main"}}
	for _, w := range c.Writes[:len(c.Writes)-1] {
		s = applyGit(s, w)
	}
	return storeDiff(got, s, applyGit(s, c.Writes[len(c.Writes)-1]))
}

// observeGit reads the repository's state with git itself.
func observeGit(ctx context.Context, repo string) (gitState, error) {
	count, err := gitOut(ctx, repo, "rev-list", "--count", "HEAD")
	if err != nil {
		return gitState{}, err
	}
	n, err := strconv.Atoi(count)
	if err != nil {
		return gitState{}, fmt.Errorf("git rev-list --count HEAD: %q", count)
	}
	tags, err := gitOut(ctx, repo, "tag", "--list")
	if err != nil {
		return gitState{}, err
	}
	branches, err := gitOut(ctx, repo, "branch", "--format=%(refname:short)")
	if err != nil {
		return gitState{}, err
	}
	s := gitState{Commits: n, Tags: lines(tags), Branches: lines(branches)}
	sort.Strings(s.Tags)
	sort.Strings(s.Branches)
	return s, nil
}

func lines(s string) []string {
	out := []string{}
	for _, l := range strings.Split(s, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			out = append(out, l)
		}
	}
	return out
}

// gitOut runs git in repo and returns its trimmed output.
func gitOut(ctx context.Context, repo string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "git", args...)
	cmd.Dir = repo
	cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_TERMINAL_PROMPT=0")
	out, err := cmd.CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("git %s in %s: %w: %s", strings.Join(args, " "), repo, err, strings.TrimSpace(string(out)))
	}
	return strings.TrimSpace(string(out)), nil
}
