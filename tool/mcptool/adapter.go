package mcptool

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/seed-7bc021c3/reckon/kernel"
)

// Facts are the statements a write call would make true in a server's
// state, each with whether it holds (a declared adapter reads them).
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

// A StateAdapter is a small, declared probe adapter for one known server's
// write tools: it says which facts a call would establish and reads them
// back with the server's own read tools. The kernel records the facts
// just before the call (the prior state), and the probe reads them again
// after the fact: a fact absent before and present after proves the call
// landed.
type StateAdapter struct {
	// Server describes the adapted server, for evidence.
	Server string
	// Writes lists the adapted write tools.
	Writes []string
	// Reads lists the read tools the adapter needs the server to offer.
	Reads []string
	facts func(tool string, args map[string]any) ([]string, error)
	read  func(ctx context.Context, cs *mcp.ClientSession, facts []string) (Facts, error)
}

// Memory is the adapter for @modelcontextprotocol/server-memory: its
// non-idempotent writes create_entities, create_relations and
// add_observations, read back with read_graph (the whole graph: relations
// cannot be opened by name, and open_nodes omits observations of entities
// it was not asked for).
var Memory = StateAdapter{
	Server: "@modelcontextprotocol/server-memory",
	Writes: []string{"create_entities", "create_relations", "add_observations"},
	Reads:  []string{"read_graph"},
	facts:  memoryFacts,
	read:   readMemory,
}

// Adapters are the declared adapters, tried in order.
var Adapters = []StateAdapter{Memory}

// AdapterFor returns the adapter of a server offering tools for the write
// tool, if any: the server must offer the adapter's read tools too.
func AdapterFor(tool string, tools map[string]bool) (StateAdapter, bool) {
	for _, a := range Adapters {
		if !contains(a.Writes, tool) {
			continue
		}
		ok := true
		for _, r := range a.Reads {
			ok = ok && tools[r]
		}
		if ok {
			return a, true
		}
	}
	return StateAdapter{}, false
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// Facts lists the facts a call of tool with args would establish.
func (a StateAdapter) Facts(tool string, args json.RawMessage) ([]string, error) {
	m, err := decodeArgs(args)
	if err != nil {
		return nil, err
	}
	f, err := a.facts(tool, m)
	if err == nil && len(f) == 0 {
		err = fmt.Errorf("%s: the call names nothing to create", tool)
	}
	return f, err
}

// Read reads the facts on an open session.
func (a StateAdapter) Read(ctx context.Context, cs *mcp.ClientSession, facts []string) (Facts, error) {
	return a.read(ctx, cs, facts)
}

func memoryFacts(tool string, args map[string]any) ([]string, error) {
	list := func(key string) []map[string]any {
		raw, _ := args[key].([]any)
		var out []map[string]any
		for _, x := range raw {
			if m, ok := x.(map[string]any); ok {
				out = append(out, m)
			}
		}
		return out
	}
	str := func(m map[string]any, k string) string { s, _ := m[k].(string); return s }
	var facts []string
	switch tool {
	case "create_entities":
		for _, e := range list("entities") {
			if n := str(e, "name"); n != "" {
				facts = append(facts, "entity\x1f"+n)
			}
		}
	case "create_relations":
		for _, r := range list("relations") {
			facts = append(facts, "relation\x1f"+str(r, "from")+"\x1f"+str(r, "relationType")+"\x1f"+str(r, "to"))
		}
	case "add_observations":
		for _, o := range list("observations") {
			contents, _ := o["contents"].([]any)
			for _, c := range contents {
				if s, ok := c.(string); ok {
					facts = append(facts, "observation\x1f"+str(o, "entityName")+"\x1f"+s)
				}
			}
		}
	default:
		return nil, fmt.Errorf("%s is not a server-memory write", tool)
	}
	// The unit separator joins a fact's parts: a part holding one could
	// spell another fact (relation a␟b␟c from "a␟b", "c", …), so a call
	// whose args use it has no facts to read.
	for _, f := range facts {
		kind, _, _ := strings.Cut(f, "\x1f")
		if strings.Count(f, "\x1f") != factParts[kind] {
			return nil, fmt.Errorf("%s: a name or text holds the unit separator (U+001F), which facts reserve", tool)
		}
	}
	return facts, nil
}

// factParts is how many parts follow each kind of fact.
var factParts = map[string]int{"entity": 1, "relation": 3, "observation": 2}

func readMemory(ctx context.Context, cs *mcp.ClientSession, facts []string) (Facts, error) {
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "read_graph", Arguments: map[string]any{}})
	if err != nil {
		return nil, fmt.Errorf("read_graph: %w", err)
	}
	if res.IsError {
		return nil, fmt.Errorf("read_graph answered an error: %s", ContentText(res.Content))
	}
	raw, err := json.Marshal(res.StructuredContent)
	if err != nil || res.StructuredContent == nil {
		raw = []byte(ContentText(res.Content))
	}
	var g struct {
		Entities []struct {
			Name         string   `json:"name"`
			Observations []string `json:"observations"`
		} `json:"entities"`
		Relations []struct {
			From, To, RelationType string
		} `json:"relations"`
	}
	if err := json.Unmarshal(raw, &g); err != nil {
		return nil, fmt.Errorf("read_graph: the answer is not a graph: %v", err)
	}
	have := map[string]bool{}
	for _, e := range g.Entities {
		have["entity\x1f"+e.Name] = true
		for _, o := range e.Observations {
			have["observation\x1f"+e.Name+"\x1f"+o] = true
		}
	}
	for _, r := range g.Relations {
		have["relation\x1f"+r.From+"\x1f"+r.RelationType+"\x1f"+r.To] = true
	}
	out := Facts{}
	for _, f := range facts {
		out[f] = have[f]
	}
	return out, nil
}

// FactString renders a fact for people (facts separate their parts with
// the unit separator, which memoryFacts refuses in names and texts).
func FactString(f string) string { return strings.ReplaceAll(f, "\x1f", " ") }

// ReadPrior implements kernel.PriorReader: for a write tool a declared
// adapter covers, it reads the facts the call would establish from the
// server, just before the call. ok is false when no adapter applies.
func (t *Tool) ReadPrior(ctx context.Context, call kernel.ToolCall) (state json.RawMessage, ok bool, err error) {
	if !contains(Memory.Writes, t.tool) {
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
	a, ok := AdapterFor(t.tool, names)
	if !ok {
		return nil, false, nil
	}
	facts, err := a.Facts(t.tool, call.Args)
	if err != nil {
		return nil, true, err
	}
	got, err := a.Read(cctx, cs.session, facts)
	if err != nil {
		return nil, true, err
	}
	b, err := json.Marshal(got)
	return b, true, err
}
