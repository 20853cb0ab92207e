package mcptool

import (
	"context"
	"embed"
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// ProbeSpec is one server's probe contracts: the field "probes" of a
// RECKON_MCP_SERVERS entry, or the server's entry in the
// RECKON_PROBE_CONTRACTS file. In JSON it is either the name of a
// contract set that ships (BuiltinSets) or an object.
type ProbeSpec struct {
	// Builtin names a set that ships; its reads and contracts come first.
	Builtin string `json:"builtin,omitempty"`
	// Reads lists tools of the server that change nothing: a later call
	// of one of them in the run cannot have changed a checked state. The
	// contracts' read tools count as reads too.
	Reads []string `json:"reads,omitempty"`
	// Contracts are the write tools' contracts.
	Contracts []Contract `json:"contracts,omitempty"`
}

// UnmarshalJSON accepts a set's name or an object.
func (p *ProbeSpec) UnmarshalJSON(b []byte) error {
	var name string
	if json.Unmarshal(b, &name) == nil {
		*p = ProbeSpec{Builtin: name}
		return nil
	}
	type plain ProbeSpec
	dec := json.NewDecoder(strings.NewReader(string(b)))
	dec.DisallowUnknownFields()
	var q plain
	if err := dec.Decode(&q); err != nil {
		return err
	}
	*p = ProbeSpec(q)
	return nil
}

//go:embed contracts/*.json
var builtinFS embed.FS

// BuiltinSets lists the contract sets that ship (tool/mcptool/contracts).
func BuiltinSets() []string {
	ents, _ := builtinFS.ReadDir("contracts")
	out := make([]string, 0, len(ents))
	for _, e := range ents {
		out = append(out, strings.TrimSuffix(e.Name(), ".json"))
	}
	sort.Strings(out)
	return out
}

// builtin returns the set that ships under name.
func builtin(name string) (ProbeSpec, error) {
	b, err := builtinFS.ReadFile("contracts/" + name + ".json")
	if err != nil {
		return ProbeSpec{}, fmt.Errorf("no contract set %q ships (there are %s)", name, strings.Join(BuiltinSets(), ", "))
	}
	var p ProbeSpec
	if err := json.Unmarshal(b, &p); err != nil {
		return ProbeSpec{}, fmt.Errorf("contract set %q: %w", name, err)
	}
	return p, nil
}

// Resolved is a server's checked contracts.
type Resolved struct {
	reads  map[string]bool
	writes map[string][]*compiled
}

// resolve expands the builtin set and compiles every contract.
func (p ProbeSpec) resolve() (*Resolved, error) {
	r := &Resolved{reads: map[string]bool{}, writes: map[string][]*compiled{}}
	specs := []ProbeSpec{p}
	if p.Builtin != "" {
		b, err := builtin(p.Builtin)
		if err != nil {
			return nil, err
		}
		specs = []ProbeSpec{b, p}
	}
	for _, s := range specs {
		for _, t := range s.Reads {
			r.reads[t] = true
		}
		for i, c := range s.Contracts {
			cc, err := compile(c)
			if err != nil {
				return nil, fmt.Errorf("contracts[%d] (%s): %w", i, c.Write, err)
			}
			r.writes[c.Write] = append(r.writes[c.Write], cc)
			r.reads[c.Read.Tool] = true
		}
	}
	return r, nil
}

// IsRead says the tool is declared to change nothing: listed as a read or
// used as a contract's read, and no contract's write (git_tag lists tags
// and creates them).
func (r *Resolved) IsRead(tool string) bool { return r != nil && r.reads[tool] && !r.Checks(tool) }

// Checks says a contract checks the write tool.
func (r *Resolved) Checks(tool string) bool { return r != nil && len(r.writes[tool]) > 0 }

// Facts lists the facts a call of the write tool with args would
// establish (a Changed contract's without their value).
func (r *Resolved) Facts(tool string, args json.RawMessage) ([]Fact, error) {
	m, err := decodeArgs(args)
	if err != nil {
		return nil, err
	}
	var out []Fact
	for _, cc := range r.writes[tool] {
		if !cc.applies(m) {
			continue
		}
		f, err := cc.facts(m)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", tool, err)
		}
		out = append(out, f...)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s: the call names nothing its contracts check", tool)
	}
	return out, nil
}

// memorySet is applied to a server declaring no probes that offers
// server-memory's tools.
const memorySet = "server-memory"

// ContractsFor returns the server's contracts: its declared probes, or
// server-memory's set for a server offering read_graph and
// create_entities. ok is false when none apply.
func (c ServerConfig) ContractsFor(tools map[string]bool) (*Resolved, bool, error) {
	spec := c.Probes
	if spec == nil {
		if !tools["read_graph"] || !tools["create_entities"] {
			return nil, false, nil
		}
		spec = &ProbeSpec{Builtin: memorySet}
	}
	r, err := spec.resolve()
	return r, err == nil, err
}

// State is what a read of a call's facts found: each fact's truth, and
// the answers read, by subject (Fact.Subject), so that a later look can
// test other facts of the same subjects.
type State struct {
	Facts Facts                      `json:"facts"`
	Reads map[string]json.RawMessage `json:"reads,omitempty"`
}

// Holds says whether the fact key holds in s; known is false when s read
// nothing that tells.
func (s State) Holds(key string) (holds, known bool) {
	if f, err := ParseFact(key); err == nil {
		if raw, ok := s.Reads[f.Subject()]; ok {
			var v any
			if json.Unmarshal(raw, &v) == nil {
				return f.Eval(v), true
			}
		}
	}
	h, ok := s.Facts[key]
	return h, ok
}

// ReadFacts makes the facts' reads on an open session (each subject once)
// and tests them; a fact of a Changed contract without a value gets the
// value read now, so it is false here by construction.
func ReadFacts(ctx context.Context, cs *mcp.ClientSession, facts []Fact) (State, error) {
	st := State{Facts: Facts{}, Reads: map[string]json.RawMessage{}}
	answers := map[string]any{}
	for _, f := range facts {
		subj := f.Subject()
		ans, ok := answers[subj]
		if !ok {
			var err error
			if ans, err = callRead(ctx, cs, f); err != nil {
				return State{}, err
			}
			answers[subj] = ans
			st.Reads[subj], _ = json.Marshal(ans)
		}
		if f.Op == opNe && f.Value == nil {
			v, _ := walk(ans, f.Path)
			f.Value, _ = json.Marshal(v)
		}
		st.Facts[f.Key()] = f.Eval(ans)
	}
	return st, nil
}

// callRead calls the fact's read tool and decodes its answer: the
// structured content, else the text content as JSON, else the text.
func callRead(ctx context.Context, cs *mcp.ClientSession, f Fact) (any, error) {
	var args map[string]any
	if err := json.Unmarshal(f.Args, &args); err != nil {
		return nil, fmt.Errorf("%s: arguments: %w", f.Read, err)
	}
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: f.Read, Arguments: args})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", f.Read, err)
	}
	if res.IsError {
		return nil, fmt.Errorf("%s answered an error: %s", f.Read, ContentText(res.Content))
	}
	if res.StructuredContent != nil {
		b, err := json.Marshal(res.StructuredContent)
		var v any
		if err == nil && json.Unmarshal(b, &v) == nil {
			return v, nil
		}
	}
	text := ContentText(res.Content)
	var v any
	if json.Unmarshal([]byte(text), &v) == nil {
		return v, nil
	}
	return text, nil
}

// ApplyContractsFile merges RECKON_PROBE_CONTRACTS (path of a JSON object
// from server name to ProbeSpec) into servers. Errors name the variable
// and the server.
func ApplyContractsFile(servers []ServerConfig, path string) ([]ServerConfig, error) {
	const v = "RECKON_PROBE_CONTRACTS"
	if strings.TrimSpace(path) == "" {
		return servers, nil
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("configuration: %s: %w", v, err)
	}
	var file map[string]*ProbeSpec
	dec := json.NewDecoder(strings.NewReader(string(b)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&file); err != nil {
		return nil, fmt.Errorf("configuration: %s (%s) is not a JSON object from server name to contracts: %v", v, path, err)
	}
	out := append([]ServerConfig(nil), servers...)
	names := make([]string, 0, len(file))
	for n := range file {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		i := serverIndex(out, n)
		switch {
		case i < 0:
			return nil, fmt.Errorf("configuration: %s: server %q is not in RECKON_MCP_SERVERS", v, n)
		case out[i].Probes != nil:
			return nil, fmt.Errorf("configuration: %s: server %q declares probes in RECKON_MCP_SERVERS too; keep one", v, n)
		}
		if _, err := file[n].resolve(); err != nil {
			return nil, fmt.Errorf("configuration: %s: server %q: %v", v, n, err)
		}
		out[i].Probes = file[n]
	}
	return out, nil
}

func serverIndex(servers []ServerConfig, name string) int {
	for i, s := range servers {
		if s.Name == name {
			return i
		}
	}
	return -1
}

// checkContracts tests a server's declared contracts against its tools:
// every write and read tool offered, every argument a contract takes from
// the write declared in the write's input schema.
func checkContracts(c ServerConfig, tools map[string]*mcp.Tool) error {
	if c.Probes == nil {
		return nil
	}
	r, err := c.Probes.resolve()
	if err != nil {
		return fmt.Errorf("probes: %w", err)
	}
	writes := make([]string, 0, len(r.writes))
	for w := range r.writes {
		writes = append(writes, w)
	}
	sort.Strings(writes)
	for _, w := range writes {
		def, ok := tools[w]
		if !ok {
			return fmt.Errorf("probes: the contract's write tool %s is not offered by the server", w)
		}
		props := schemaProps(def)
		for _, cc := range r.writes[w] {
			if _, ok := tools[cc.Read.Tool]; !ok {
				return fmt.Errorf("probes: the contract for %s names read tool %s, which the server does not offer", w, cc.Read.Tool)
			}
			for _, a := range cc.argRefs() {
				if props != nil && !props[a] {
					return fmt.Errorf("probes: the contract for %s takes $.%s, which %s's input schema does not declare, so it cannot match", w, a, w)
				}
			}
		}
	}
	return nil
}

// schemaProps are the top-level properties of a tool's input schema, nil
// when unknown.
func schemaProps(def *mcp.Tool) map[string]bool {
	if def == nil || def.InputSchema == nil {
		return nil
	}
	b, err := json.Marshal(def.InputSchema)
	if err != nil {
		return nil
	}
	var s struct {
		Properties map[string]json.RawMessage `json:"properties"`
	}
	if json.Unmarshal(b, &s) != nil || s.Properties == nil {
		return nil
	}
	out := map[string]bool{}
	for k := range s.Properties {
		out[k] = true
	}
	return out
}
