package mcptool

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestContractsCompile: every set that ships compiles, and a contract's
// mistakes are refused naming the field.
func TestContractsCompile(t *testing.T) {
	t.Parallel()
	for _, name := range BuiltinSets() {
		if _, err := (ProbeSpec{Builtin: name}).resolve(); err != nil {
			t.Errorf("set %s: %v", name, err)
		}
	}
	for _, c := range []struct {
		contract, want string
	}{
		{`{"write":"w","read":{"tool":"r"},"effect":"a","occurred":{}}`, "occurred: set exactly one"},
		{`{"write":"w","read":{"tool":"r"},"effect":"a","occurred":{"exists":true,"changed":true}}`, "occurred: set exactly one"},
		{`{"write":"w","read":{"tool":"r","args":{"id":"$x.id"}},"effect":"a","occurred":{"exists":true}}`, "read.args.id: $x is not bound"},
		{`{"write":"w","read":{"tool":"r"},"effect":"a[b=$e.c","occurred":{"exists":true}}`, "effect"},
		{`{"write":"w","each":[{"as":"e","in":"items"}],"read":{"tool":"r"},"effect":"a","occurred":{"exists":true}}`, "each[0].in"},
		{`{"read":{"tool":"r"},"effect":"a","occurred":{"exists":true}}`, "write: is required"},
	} {
		var ct Contract
		if err := json.Unmarshal([]byte(c.contract), &ct); err != nil {
			t.Fatal(err)
		}
		if _, err := compile(ct); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.contract, err, c.want)
		}
	}
	if _, err := ParseConfig(`[{"name":"a","command":["x"],"probes":"nonesuch"}]`); err == nil || !strings.Contains(err.Error(), `[0].probes: no contract set "nonesuch"`) {
		t.Errorf("unknown set: %v", err)
	}
}

// TestContractFacts: facts resolve references, iterate arrays, and test
// the answer; a name holding any character stays one fact (facts are
// JSON, not joined text).
func TestContractFacts(t *testing.T) {
	t.Parallel()
	r, err := (ProbeSpec{Builtin: "server-memory"}).resolve()
	if err != nil {
		t.Fatal(err)
	}
	facts, err := r.Facts("add_observations", json.RawMessage(`{"observations":[{"entityName":"e\u001fx","contents":["o1","o2"]}]}`))
	if err != nil || len(facts) != 2 {
		t.Fatalf("facts %v, %v", facts, err)
	}
	graph := decode(t, `{"entities":[{"name":"e\u001fx","observations":["o1"]}],"relations":[]}`)
	if !facts[0].Eval(graph) || facts[1].Eval(graph) {
		t.Errorf("o1 holds, o2 does not: %v %v", facts[0].Eval(graph), facts[1].Eval(graph))
	}
	back, err := ParseFact(facts[0].Key())
	if err != nil || back.Key() != facts[0].Key() || !strings.Contains(back.String(), `observations[="o1"] exists`) {
		t.Errorf("round trip: %v %q", err, back.String())
	}
	eq, _ := compile(Contract{Write: "cancel", Read: ReadSpec{Tool: "get", Args: map[string]any{"id": "$.order_id"}}, Effect: "status", Occurred: Occurred{Equals: "cancelled"}})
	f, err := eq.facts(map[string]any{"order_id": "#W1"})
	if err != nil || string(f[0].Args) != `{"id":"#W1"}` {
		t.Fatalf("%v %v", f, err)
	}
	if f[0].Eval(decode(t, `{"status":"pending"}`)) || !f[0].Eval(decode(t, `{"status":"cancelled"}`)) {
		t.Error("equals")
	}
	ch, _ := compile(Contract{Write: "w", Read: ReadSpec{Tool: "get"}, Effect: "rows[id=$.id].v", Occurred: Occurred{Changed: true}})
	f, _ = ch.facts(map[string]any{"id": 7.0})
	f[0].Value = json.RawMessage(`"old"`)
	if f[0].Eval(decode(t, `{"rows":[{"id":"7","v":"old"}]}`)) || !f[0].Eval(decode(t, `{"rows":[{"id":7,"v":"new"}]}`)) {
		t.Error("changed, ids compared by value")
	}
}

func decode(t *testing.T, s string) any {
	t.Helper()
	var v any
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		t.Fatal(err)
	}
	return v
}
