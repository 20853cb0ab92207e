package mcptool

import "testing"

// TestEndpoint: the identity follows where calls go (URL location,
// command and arguments) and nothing else — not credentials, headers,
// env or the name.
func TestEndpoint(t *testing.T) {
	base := ServerConfig{Name: "issues", URL: "http://store.example:9000/mcp"}
	same := []ServerConfig{
		{Name: "other", URL: "http://store.example:9000/mcp"},
		{Name: "issues", URL: "HTTP://Store.Example:9000/mcp"},
		{Name: "issues", URL: "http://user:secret@store.example:9000/mcp"},
		{Name: "issues", URL: "http://store.example:9000/mcp?token=secret#x"},
		{Name: "issues", URL: "http://store.example:9000/mcp", Headers: map[string]string{"Authorization": "Bearer secret"}, Timeout: "5s"},
	}
	for _, c := range same {
		if c.Endpoint() != base.Endpoint() {
			t.Errorf("%+v: endpoint %s, want %s (same location)", c, c.Endpoint(), base.Endpoint())
		}
	}
	differ := []ServerConfig{
		{Name: "issues", URL: "http://staging.example:9000/mcp"},
		{Name: "issues", URL: "http://store.example:9001/mcp"},
		{Name: "issues", URL: "https://store.example:9000/mcp"},
		{Name: "issues", URL: "http://store.example:9000/mcp2"},
		{Name: "issues", Command: []string{"http://store.example:9000/mcp"}},
	}
	for _, c := range differ {
		if c.Endpoint() == base.Endpoint() {
			t.Errorf("%+v: endpoint %s equals the base's", c, c.Endpoint())
		}
	}
	cmd := ServerConfig{Name: "fs", Command: []string{"node", "server.js", "{workspace}"}}
	if got := (ServerConfig{Name: "fs", Command: []string{"node", "server.js", "{workspace}"}, Env: map[string]string{"TOKEN": "secret"}}).Endpoint(); got != cmd.Endpoint() {
		t.Errorf("env changed the endpoint: %s, want %s", got, cmd.Endpoint())
	}
	for _, argv := range [][]string{{"node", "server.js", "/staging"}, {"node", "server.js {workspace}"}, {"node"}} {
		if got := (ServerConfig{Name: "fs", Command: argv}).Endpoint(); got == cmd.Endpoint() {
			t.Errorf("command %q: endpoint equals %q's", argv, cmd.Command)
		}
	}
	if e := base.Endpoint(); len(e) != 16 {
		t.Errorf("endpoint %q: want 16 hex digits", e)
	}
}
