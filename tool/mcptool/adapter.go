package mcptool

import (
	"context"
	"encoding/json"
	"sort"

	"github.com/seed-7bc021c3/reckon/kernel"
)

// Facts are the statements a write call would make true in a server's
// state (Fact keys), each with whether it holds.
type Facts map[string]bool

// Names returns the facts' statements, sorted.
func (f Facts) Names() []string {
	out := make([]string, 0, len(f))
	for k := range f {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// FactString renders a fact key for people.
func FactString(key string) string {
	f, err := ParseFact(key)
	if err != nil {
		return key
	}
	return f.String()
}

// ReadPrior implements kernel.PriorReader: for a write tool a probe
// contract of its server checks (ServerConfig.ContractsFor), it reads the
// contract's reads just before the call and records the facts the call
// would establish with whether they already hold (a State). ok is false
// when no contract applies.
func (t *Tool) ReadPrior(ctx context.Context, call kernel.ToolCall) (state json.RawMessage, ok bool, err error) {
	if t.srv.cfg.Probes == nil && !contains(memoryWrites, t.tool) {
		return nil, false, nil
	}
	cctx, cancel := context.WithTimeout(ctx, t.srv.cfg.timeout(t.srv.opts.Timeout))
	defer cancel()
	cs, err := t.srv.connect(cctx, call.Workspace, call.Project, call.RunID, "", nil)
	if err != nil {
		return nil, true, err
	}
	defer cs.close()
	tools, err := cs.listTools(cctx)
	if err != nil {
		return nil, true, err
	}
	names := map[string]bool{}
	for n := range tools {
		names[n] = true
	}
	r, ok, err := t.srv.cfg.ContractsFor(names)
	if err != nil {
		return nil, true, err
	}
	if !ok || !r.Checks(t.tool) {
		return nil, false, nil
	}
	facts, err := r.Facts(t.tool, call.Args)
	if err != nil {
		return nil, true, err
	}
	st, err := ReadFacts(cctx, cs.session, facts)
	if err != nil {
		return nil, true, err
	}
	b, err := json.Marshal(st)
	return b, true, err
}

// memoryWrites are the writes of server-memory's set, applied without a
// declaration (ServerConfig.ContractsFor).
var memoryWrites = []string{"create_entities", "create_relations", "add_observations"}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
