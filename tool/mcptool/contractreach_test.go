package mcptool

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/seed-7bc021c3/reckon/internal/npmtest"
)

// TestReachChecksContracts: at start-up a contract naming a tool the
// server does not offer, or an argument the write's input schema does
// not declare, stops the process with one line naming the server; the
// set that ships for server-memory passes against the real server.
func TestReachChecksContracts(t *testing.T) {
	t.Parallel()
	mem := ServerConfig{Name: "memory", Command: []string{"node", npmtest.Entry(t, "server-memory")},
		Env: map[string]string{"MEMORY_FILE_PATH": filepath.Join(t.TempDir(), "m.jsonl")}}
	ctx := context.Background()
	ok := mem
	ok.Probes = &ProbeSpec{Builtin: "server-memory"}
	if err := Reach(ctx, []ServerConfig{ok}, Config{}); err != nil {
		t.Fatalf("server-memory's own set: %v", err)
	}
	for _, c := range []struct {
		contract, want string
	}{
		{`{"write":"cancel_order","read":{"tool":"read_graph"},"effect":"x","occurred":{"exists":true}}`, "write tool cancel_order is not offered"},
		{`{"write":"create_entities","read":{"tool":"get_order"},"effect":"x","occurred":{"exists":true}}`, "read tool get_order, which the server does not offer"},
		{`{"write":"create_entities","each":[{"as":"e","in":"$.entitys"}],"read":{"tool":"read_graph"},"effect":"entities[name=$e.name]","occurred":{"exists":true}}`, "takes $.entitys, which create_entities's input schema does not declare"},
	} {
		file := filepath.Join(t.TempDir(), "contracts.json")
		if err := os.WriteFile(file, []byte(`{"memory":{"contracts":[`+c.contract+`]}}`), 0o600); err != nil {
			t.Fatal(err)
		}
		servers, err := ApplyContractsFile([]ServerConfig{mem}, file)
		if err != nil {
			t.Fatal(err)
		}
		err = Reach(ctx, servers, Config{})
		if err == nil || !strings.Contains(err.Error(), `[0] ("memory") probes: `) || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: %v, want one line containing %q", c.contract, err, c.want)
		}
	}
	if _, err := ApplyContractsFile([]ServerConfig{mem}, writeFile(t, `{"billing":"server-memory"}`)); err == nil || !strings.Contains(err.Error(), `RECKON_PROBE_CONTRACTS: server "billing" is not in RECKON_MCP_SERVERS`) {
		t.Errorf("unknown server: %v", err)
	}
}

func writeFile(t *testing.T, s string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "f.json")
	if err := os.WriteFile(p, []byte(s), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}
