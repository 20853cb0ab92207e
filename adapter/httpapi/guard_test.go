package httpapi_test

import (
	"net/http"
	"testing"

	"github.com/seed-7bc021c3/reckon/adapter/httpapi"
	"github.com/seed-7bc021c3/reckon/kernel"
)

// TestGuardRoute: POST /v1/agent/operations/guard answers an agent and an
// operator, refuses a reader (403), another project's agent (403) and a
// malformed body naming its field (400); an uncertain call holds its twin,
// whose arguments may be spelt differently, and an operator's ruling
// occurred turns the answer to done with the ruling.
func TestGuardRoute(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	_, ts := newAPI(t, e)
	uncertainOp(e, "beta", "run-1", "agent-x")
	u := ts.URL + httpapi.PathGuard
	twin := `{"project":"beta","tool":"run_command","args":{ "command" : "echo ok > proof.txt" }}`
	for _, c := range []struct {
		name, token, body string
		want              int
	}{
		{"no token", "", twin, http.StatusUnauthorized},
		{"reader", readerTok, twin, http.StatusForbidden},
		{"an agent of another project", acmeAgentTok, twin, http.StatusForbidden},
		{"no tool", agentTok, `{"project":"beta","args":{}}`, http.StatusBadRequest},
		{"unknown field", agentTok, `{"project":"beta","tool":"t","arg":{}}`, http.StatusBadRequest},
		{"bad scope", agentTok, `{"project":"beta","tool":"t","scope":"all"}`, http.StatusBadRequest},
	} {
		if r := call(t, http.MethodPost, u, c.token, c.body); r.status != c.want {
			t.Errorf("%s: %d %s, want %d", c.name, r.status, r.raw, c.want)
		}
	}
	r := call(t, http.MethodPost, u, agentTok, twin)
	op, _ := r.body["operation"].(map[string]any)
	if r.status != http.StatusOK || r.body["decision"] != "hold" || op["operation_id"] != "op-1" || op["run_id"] != "run-1" {
		t.Fatalf("twin of an uncertain call: %d %s", r.status, r.raw)
	}
	if r := call(t, http.MethodPost, u, operatorTok, `{"project":"beta","tool":"run_command","args":{"command":"echo other"}}`); r.body["decision"] != "proceed" {
		t.Fatalf("other args: %d %s", r.status, r.raw)
	}
	if r := call(t, http.MethodPost, ts.URL+httpapi.PathReconcile, operatorTok,
		`{"project":"beta","run_id":"run-1","operation_id":"op-1","effect":"occurred","note":"proof.txt is there"}`); r.status != http.StatusCreated {
		t.Fatalf("reconcile: %d %s", r.status, r.raw)
	}
	r = call(t, http.MethodPost, u, agentTok, twin)
	rec, _ := r.body["reconciliation"].(map[string]any)
	data, _ := rec["data"].(map[string]any)
	if r.body["decision"] != "done" || rec["actor"] != "operator:ann" || data["note"] != "proof.txt is there" || data["basis"] != kernel.BasisOperator {
		t.Fatalf("after the ruling: %d %s", r.status, r.raw)
	}
}
