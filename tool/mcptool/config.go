package mcptool

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"time"
)

// ServerConfig configures one MCP server. Exactly one of Command (stdio: the
// process is started for every call) and URL (streamable HTTP: a new
// connection for every call) is set.
//
// RECKON_MCP_SERVERS holds a JSON array of these, e.g.
//
//	[{"name":"issues","command":["reckon","mcp-test-server"]},
//	 {"name":"fs","command":["node","/path/server-filesystem/dist/index.js","{workspace}"]},
//	 {"name":"remote","url":"http://127.0.0.1:9000/mcp","headers":{"Authorization":"Bearer …"},"timeout":"30s"}]
//
// In command, env values, url and header values the placeholders
// {workspace}, {project} and {run_id} are replaced per call by the run's
// values, so a filesystem server can be rooted at the run's workspace.
type ServerConfig struct {
	// Name identifies the server; "mcp__<name>__<tool>" addresses its tool
	// explicitly when several servers offer the same tool name.
	Name string `json:"name"`
	// Command is argv of a stdio server.
	Command []string `json:"command,omitempty"`
	// Env adds variables to a stdio server's environment (on top of
	// reckon's own).
	Env map[string]string `json:"env,omitempty"`
	// Dir is a stdio server's working directory (default: reckon's).
	Dir string `json:"dir,omitempty"`
	// URL is a streamable HTTP endpoint.
	URL string `json:"url,omitempty"`
	// Headers are added to every HTTP request to URL.
	Headers map[string]string `json:"headers,omitempty"`
	// Tools, when set, lists the server's tools and skips discovery
	// (tools/list is still asked on every call, to validate arguments).
	Tools []string `json:"tools,omitempty"`
	// Timeout bounds one whole call (connect, list, call) as a Go duration;
	// default 60s.
	Timeout string `json:"timeout,omitempty"`
	// TrustAnnotations says the operator trusts the server's tool
	// annotations: a tool it marks readOnlyHint then settles none when a
	// call of it failed uncertain. Off by default, as the MCP
	// specification says annotations from untrusted servers must not be
	// relied on.
	TrustAnnotations bool `json:"trust_annotations,omitempty"`
	// Exclusive says the operator declares the server's store exclusive
	// to this project: no one but this project's runs writes it. A probe
	// that reads the store back (mcp.state) credits a change to a call
	// only then, or when the change carries something only the call could
	// have made; another writer of a shared store could have made it.
	// Off by default.
	Exclusive bool `json:"exclusive,omitempty"`
	// Probes are the server's probe contracts (docs/probe-contracts.md):
	// a set that ships by name, or an object. A server without them that
	// offers server-memory's tools gets server-memory's set.
	Probes *ProbeSpec `json:"probes,omitempty"`
}

// timeout returns the configured per-call timeout or def.
func (c ServerConfig) timeout(def time.Duration) time.Duration {
	if c.Timeout == "" {
		return def
	}
	d, _ := time.ParseDuration(c.Timeout) // checked by ParseConfig
	return d
}

// ParseConfig parses RECKON_MCP_SERVERS. An empty value means no MCP
// servers. Errors name the variable and the offending entry and field.
func ParseConfig(value string) ([]ServerConfig, error) {
	const v = "RECKON_MCP_SERVERS"
	if strings.TrimSpace(value) == "" {
		return nil, nil
	}
	var servers []ServerConfig
	dec := json.NewDecoder(strings.NewReader(value))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&servers); err != nil {
		return nil, fmt.Errorf("configuration: %s is not a JSON array of servers ({\"name\":..,\"command\":[..]} or {\"name\":..,\"url\":..}): %v", v, err)
	}
	if err := Check(servers); err != nil {
		return nil, fmt.Errorf("configuration: %s%v", v, err)
	}
	return servers, nil
}

// Check validates server configurations; the error text starts with the
// entry's index and field, e.g. "[1].url: ...".
func Check(servers []ServerConfig) error {
	seen := map[string]bool{}
	for i, s := range servers {
		at := func(field, format string, args ...any) error {
			return fmt.Errorf("[%d].%s: %s", i, field, fmt.Sprintf(format, args...))
		}
		if s.Name == "" {
			return at("name", "is required")
		}
		if strings.Contains(s.Name, "__") {
			return at("name", "must not contain \"__\" (it separates server and tool in mcp__<server>__<tool>), got %q", s.Name)
		}
		if seen[s.Name] {
			return at("name", "%q is used twice", s.Name)
		}
		seen[s.Name] = true
		switch {
		case len(s.Command) > 0 && s.URL != "":
			return at("url", "set either command (stdio) or url (streamable HTTP), not both")
		case len(s.Command) == 0 && s.URL == "":
			return at("command", "set command (stdio server argv) or url (streamable HTTP endpoint)")
		case len(s.Command) > 0 && s.Command[0] == "":
			return at("command", "the program (first element) is empty")
		case s.URL != "":
			u, err := url.Parse(placeholders("w", "p", "r").Replace(s.URL))
			if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
				return at("url", "must be an http(s) URL, got %q", s.URL)
			}
			if len(s.Env) > 0 || s.Dir != "" {
				return at("env", "env and dir apply to stdio servers (command) only")
			}
		}
		if len(s.Command) > 0 && len(s.Headers) > 0 {
			return at("headers", "headers apply to HTTP servers (url) only")
		}
		if s.Timeout != "" {
			d, err := time.ParseDuration(s.Timeout)
			if err != nil || d <= 0 {
				return at("timeout", "must be a positive Go duration (e.g. 30s), got %q", s.Timeout)
			}
		}
		if s.Probes != nil {
			if _, err := s.Probes.resolve(); err != nil {
				return at("probes", "%v", err)
			}
		}
		for j, t := range s.Tools {
			if t == "" {
				return at(fmt.Sprintf("tools[%d]", j), "is empty")
			}
		}
	}
	return nil
}

// placeholders returns the per-call substitution of a run's values.
func placeholders(workspace, project, runID string) *strings.Replacer {
	return strings.NewReplacer("{workspace}", workspace, "{project}", project, "{run_id}", runID)
}

// usesWorkspace reports whether any part of the configuration needs the
// run's workspace.
func (c ServerConfig) usesWorkspace() bool {
	has := func(s string) bool { return strings.Contains(s, "{workspace}") }
	for _, a := range c.Command {
		if has(a) {
			return true
		}
	}
	for _, v := range c.Env {
		if has(v) {
			return true
		}
	}
	for _, v := range c.Headers {
		if has(v) {
			return true
		}
	}
	return has(c.URL) || has(c.Dir)
}

// Endpoint is the server's endpoint identity: a short, stable digest of
// where its calls go — the URL of an HTTP server (scheme, host and path:
// user info, query and fragment are left out, as they may carry
// credentials), the command and its arguments of a stdio server (env and
// dir are left out: env carries secrets) — as configured, placeholders
// unfilled, so every process configured alike computes the same value.
// The kernel and the MCP gateway record it in tool.started
// (server_endpoint) and the MCP probes compare it with their own server of
// the same name: a name that goes elsewhere here (a staging store) must
// not answer for the call. Headers never enter it, and a digest cannot be
// turned back into what it hashed; still, a secret has no place in a URL
// path or in argv.
func (c ServerConfig) Endpoint() string {
	var what []string
	if len(c.Command) > 0 {
		what = append([]string{"command"}, c.Command...)
	} else {
		what = []string{"url", urlLocation(c.URL)}
	}
	b, _ := json.Marshal(what) // a list of strings always encodes
	sum := sha256.Sum256(append([]byte("reckon mcp endpoint v1\x00"), b...))
	return hex.EncodeToString(sum[:8])
}

// urlLocation is raw without user info, query and fragment, its scheme
// and host lowercased. It works on the text rather than a parsed URL so
// that placeholders ({project} in a host, say) need not parse.
func urlLocation(raw string) string {
	scheme, rest, ok := strings.Cut(raw, "://")
	if !ok {
		scheme, rest = "", raw
	}
	if i := strings.IndexAny(rest, "?#"); i >= 0 {
		rest = rest[:i]
	}
	host, path := rest, ""
	if i := strings.IndexByte(rest, '/'); i >= 0 {
		host, path = rest[:i], rest[i:]
	}
	if i := strings.LastIndexByte(host, '@'); i >= 0 {
		host = host[i+1:]
	}
	return strings.ToLower(scheme) + "://" + strings.ToLower(host) + path
}
