package gateway

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/seed-7bc021c3/reckon/tool/mcptool"
)

// Command is the parsed command line of `reckon mcp-gateway`.
type Command struct {
	Config
	// HTTPAddr serves streamable HTTP at http://HTTPAddr/mcp; empty: stdio.
	HTTPAddr string
	// Publisher runs an outbox publisher in the gateway's process.
	Publisher bool
}

const usageText = `usage: reckon mcp-gateway [flags]

An MCP server in front of the MCP servers of RECKON_MCP_SERVERS: it serves
the union of their tools under their own names, and makes every tools/call
a reckon operation — tool.started is durable in DATABASE_URL's outbox
before the call is sent upstream with the idempotency key
<project>/<run_id>/<operation_id> in _meta["dev.reckon/idempotency-key"],
and tool.completed or tool.failed follows. The agent sees the upstream's
results unchanged, and the upstreams' resources, prompts, completions,
notifications and requests to the client (sampling, elicitation, roots)
pass through (docs/mcp-gateway.md).

Stdio by default (an MCP host starts it as a command; stdout is the MCP
channel, logs go to stderr); --http ADDR serves streamable HTTP at
http://ADDR/mcp instead, one run per MCP session. A client may name the run
of a call in _meta["dev.reckon/run-id"] to keep one run across sessions.

environment:
  DATABASE_URL             PostgreSQL (migrations are applied at start-up)
  RECKON_MCP_SERVERS       upstream servers, JSON as for the kernel
                           (docs/runs-and-tools.md); {project} is filled,
                           {workspace} and {run_id} are refused
  RECKON_GATEWAY_PROJECT   project of every run (default "default")
  RECKON_GATEWAY_SOURCE    source_id of the events (default "mcp-gateway")
  RECKON_GATEWAY_TOKEN     bearer token HTTP clients must send (required
                           with --http on a non-loopback address)
  RECKON_GATEWAY_MAX_SESSIONS  with --http, MCP sessions open at once
                           (default 256; a new one beyond is refused, 503)
  RECKON_GATEWAY_MAX_CONNS_PER_CLIENT  with --http, connections one client
                           address holds open at once (default 32; 0: no cap)
  RECKON_LOG_LEVEL, RECKON_LOG_FORMAT

flags:
`

// ParseCommand parses the command line, with defaults from getenv. -h
// prints the usage to stderr and returns flag.ErrHelp. Errors name the flag
// or variable in one line.
func ParseCommand(args []string, getenv func(string) string, stderr io.Writer) (Command, error) {
	env := func(k, def string) string {
		if v := strings.TrimSpace(getenv(k)); v != "" {
			return v
		}
		return def
	}
	fs := flag.NewFlagSet("mcp-gateway", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, usageText)
		fs.PrintDefaults()
	}
	var c Command
	fs.StringVar(&c.Project, "project", env("RECKON_GATEWAY_PROJECT", DefaultProject), "project of every run (RECKON_GATEWAY_PROJECT)")
	fs.StringVar(&c.Source, "source", env("RECKON_GATEWAY_SOURCE", DefaultSource), "source_id of the gateway's events (RECKON_GATEWAY_SOURCE); kernel, supervisor and operator… are refused")
	servers := fs.String("servers", env("RECKON_MCP_SERVERS", ""), "upstream MCP servers as JSON (default RECKON_MCP_SERVERS)")
	fs.StringVar(&c.HTTPAddr, "http", "", "serve streamable HTTP at http://ADDR/mcp instead of stdio (e.g. 127.0.0.1:8765; port 0 picks one)")
	fs.BoolVar(&c.Publisher, "publisher", true, "deliver the outbox to the journal from this process; --publisher=false when reckon serve --publisher runs elsewhere")
	fs.DurationVar(&c.MCP.Timeout, "timeout", mcptool.DefaultTimeout, "default upstream call timeout (a server's \"timeout\" overrides it); past it the call fails uncertain")
	fs.DurationVar(&c.Lease, "lease", DefaultLease, "instance lease: this long after a gateway stops renewing it, another gateway ends its session runs (run.failed)")
	fs.DurationVar(&c.ShutdownGrace, "shutdown-grace", DefaultShutdownGrace, "on SIGTERM/SIGINT, how long calls in flight may finish before they are canceled")
	fs.DurationVar(&c.SessionIdle, "session-idle", DefaultSessionIdle, "with --http, close MCP sessions idle this long (their runs complete)")
	maxConns := fs.String("max-conns-per-client", env("RECKON_GATEWAY_MAX_CONNS_PER_CLIENT", strconv.Itoa(DefaultMaxConnsPerClient)), "with --http, the most connections one client address holds open at once (RECKON_GATEWAY_MAX_CONNS_PER_CLIENT); 0: no cap")
	maxSessions := fs.String("max-sessions", env("RECKON_GATEWAY_MAX_SESSIONS", strconv.Itoa(DefaultMaxSessions)), "with --http, the most MCP sessions open at once (RECKON_GATEWAY_MAX_SESSIONS); a new one beyond it is refused with 503")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return Command{}, err
		}
		return Command{}, &UsageError{Err: err}
	}
	if fs.NArg() > 0 {
		return Command{}, &UsageError{Err: fmt.Errorf("unexpected arguments %q (see --help)", fs.Args())}
	}
	for name, d := range map[string]time.Duration{"--timeout": c.MCP.Timeout, "--lease": c.Lease, "--shutdown-grace": c.ShutdownGrace, "--session-idle": c.SessionIdle} {
		if d <= 0 {
			return Command{}, fmt.Errorf("configuration: %s must be a positive duration, got %s", name, d)
		}
	}
	n, nerr := strconv.Atoi(*maxSessions)
	if nerr != nil || n < 1 {
		return Command{}, fmt.Errorf("configuration: --max-sessions (RECKON_GATEWAY_MAX_SESSIONS) must be a whole number of at least 1, got %q", *maxSessions)
	}
	c.MaxSessions = n
	if c.MaxConnsPerClient, nerr = strconv.Atoi(*maxConns); nerr != nil || c.MaxConnsPerClient < 0 {
		return Command{}, fmt.Errorf("configuration: --max-conns-per-client (RECKON_GATEWAY_MAX_CONNS_PER_CLIENT) must be a whole number, 0 for no cap, got %q", *maxConns)
	}
	if c.MaxConnsPerClient == 0 {
		c.MaxConnsPerClient = -1 // Config's zero is the default; no cap is negative
	}
	if c.Lease < 3*time.Second/10 {
		return Command{}, fmt.Errorf("configuration: --lease must be at least 300ms (heartbeats come every lease/3), got %s", c.Lease)
	}
	var err error
	if c.Servers, err = mcptool.ParseConfig(*servers); err != nil {
		return Command{}, err
	}
	c.Token = getenv("RECKON_GATEWAY_TOKEN")
	if c.HTTPAddr != "" {
		host, _, err := net.SplitHostPort(c.HTTPAddr)
		if err != nil {
			return Command{}, fmt.Errorf("configuration: --http must be HOST:PORT (e.g. 127.0.0.1:8765), got %q", c.HTTPAddr)
		}
		if c.Token == "" && !loopback(host) {
			return Command{}, fmt.Errorf("configuration: --http %s is not a loopback address and RECKON_GATEWAY_TOKEN is unset: anyone who reaches it could call the upstream tools; set a token or bind 127.0.0.1", c.HTTPAddr)
		}
	}
	if err := c.Validate(); err != nil {
		return Command{}, err
	}
	return c, nil
}

func loopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// UsageError is a mistake in the command line (an unknown flag, a stray
// argument), as opposed to a bad configuration value: the binary exits 2
// for it, as for every command's.
type UsageError struct{ Err error }

// Error implements error.
func (e *UsageError) Error() string { return e.Err.Error() }

// Unwrap returns the parse error.
func (e *UsageError) Unwrap() error { return e.Err }

// IsHelp reports whether err is the answer to -h/--help.
func IsHelp(err error) bool { return errors.Is(err, flag.ErrHelp) }
