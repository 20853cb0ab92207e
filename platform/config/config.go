// Package config reads reckon's configuration from the environment exactly
// as docs/configuration.md names it. A bad value stops start-up with one
// line naming the variable and what is wrong.
package config

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/robfig/cron/v3"
)

// DefaultDatabaseURL is used when DATABASE_URL is unset.
const DefaultDatabaseURL = "postgres://localhost:5432/reckon?sslmode=disable"

// Config is the whole process configuration.
type Config struct {
	DatabaseURL       string
	TemporalAddress   string // empty: embedded server
	TemporalNamespace string
	TaskQueue         string
	HTTPAddr          string
	// HTTPMaxConnsPerClient caps the API connections one client address
	// holds open at once (RECKON_HTTP_MAX_CONNS_PER_CLIENT, default 128;
	// 0: no cap). Behind a proxy, every client shares its address.
	HTTPMaxConnsPerClient int
	// MetricsAddr, when set, serves this process's /metrics on its own
	// listener (RECKON_METRICS_ADDR), so every serve role can be scraped,
	// not only the API's.
	MetricsAddr string
	// TLSCertFile and TLSKeyFile, when set (RECKON_TLS_CERT_FILE,
	// RECKON_TLS_KEY_FILE, both or neither), make the API serve HTTPS with
	// the PEM certificate and key in those files, read again when they are
	// replaced (kernel/certfile).
	TLSCertFile      string
	TLSKeyFile       string
	Tokens           string // RECKON_TOKENS
	TokensFile       string // RECKON_TOKENS_FILE
	DataDir          string
	OperationsWindow time.Duration
	StaleAfter       time.Duration
	TriageSchedule   string
	// SweepLease (RECKON_SWEEP_LEASE, default 30s) is how long a pipeline
	// process's lease on its share of the scheduled sweep lasts unrenewed
	// (renewed every third of it): a process that dies hands its projects
	// to the others within about one lease (docs/triage.md).
	SweepLease        time.Duration
	SupervisorBaseURL string
	SupervisorAPIKey  string
	SupervisorModel   string
	// SupervisorSettle is the settlement policy (RECKON_SUPERVISOR_SETTLE):
	// evidence (default) holds a supervisor's occurred/none that no probe
	// or kernel fact proves as unknown for an operator; inference settles
	// it as given.
	SupervisorSettle  string
	FaultAfterEffect  string
	FaultBeforeEffect string
	LogLevel          string
	LogFormat         string // json | console | "" (console on a TTY)
	// SandboxUnconfined allows run_command without bubblewrap
	// (RECKON_SANDBOX_UNCONFINED=1); every event then says so.
	SandboxUnconfined bool
	// SandboxMaxProcs bounds the processes of one command
	// (RECKON_SANDBOX_MAX_PROCS, default 256).
	SandboxMaxProcs int
	// SandboxMaxMemory bounds each process's address space and the private
	// /tmp, in bytes (RECKON_SANDBOX_MAX_MEMORY, default 1 GiB).
	SandboxMaxMemory int64
	// SandboxMaxFileSize bounds any file a command writes, in bytes
	// (RECKON_SANDBOX_MAX_FILE_SIZE, default 1 GiB).
	SandboxMaxFileSize int64
	// SandboxUID and SandboxGID are the identity a root worker runs the
	// sandbox as (RECKON_SANDBOX_UID=uid[:gid], default 65534:65534).
	SandboxUID, SandboxGID uint32
	// AgentBaseURL, AgentAPIKey and AgentModel (RECKON_AGENT_BASE_URL,
	// RECKON_AGENT_API_KEY, RECKON_AGENT_MODEL) are the OpenAI-compatible
	// chat-completions endpoint of agent runs and its default model
	// (docs/agents.md); unset, POST /v1/runs refuses an agent.
	AgentBaseURL string
	AgentAPIKey  string
	AgentModel   string
	// MCPServers configures MCP servers (RECKON_MCP_SERVERS), see
	// docs/runs-and-tools.md.
	MCPServers string
	// GuardExempt names the tools (as their MCP server names them) the MCP
	// gateway's retry guard never holds (RECKON_GUARD_EXEMPT, a
	// comma-separated list; tools annotated readOnlyHint or idempotentHint
	// are never held either).
	GuardExempt []string
	// ProbeContracts is the path of a JSON file of probe contracts per
	// server of MCPServers (RECKON_PROBE_CONTRACTS), see
	// docs/probe-contracts.md.
	ProbeContracts string
	// ToolHeartbeatTimeout (RECKON_TOOL_HEARTBEAT_TIMEOUT) is how long a
	// tool call may go without a heartbeat before its worker counts as
	// dead and the call ends tool.failed(effect=uncertain). It bounds how
	// long a dead worker's operation stays invisible. Runs carry the value
	// of the process that started them.
	ToolHeartbeatTimeout time.Duration
	// AwaitTimeout (RECKON_AWAIT_TIMEOUT, default 72h) bounds how long a
	// run waits for the settlement of an operation whose step says
	// on_uncertain: await; past it the run fails. Runs carry the value of
	// the process that started them.
	AwaitTimeout time.Duration
	// ManifestMaxFiles and ManifestBudget cap one workspace manifest
	// (RECKON_MANIFEST_MAX_FILES, default 100000 entries;
	// RECKON_MANIFEST_BUDGET, default 10s): past a cap the manifest says
	// it is truncated and the workspace-diff probe proves nothing with it.
	ManifestMaxFiles int
	ManifestBudget   time.Duration
	// EvidenceRetention (RECKON_EVIDENCE_RETENTION, default 720h) is how
	// long workspace manifests and MCP prior states are kept before the
	// periodic maintenance deletes them; a probe whose evidence is gone
	// says inconclusive.
	EvidenceRetention time.Duration
	// JournalRetention (RECKON_JOURNAL_RETENTION, unset or 0: off) is how
	// long the journal keeps a week of events after the week ends; older
	// weekly partitions are dropped by the maintenance loop
	// (docs/scaling.md#time-partitions-and-retention). It is at least
	// OperationsWindow.
	JournalRetention time.Duration
	// JournalExportDir (RECKON_JOURNAL_EXPORT_DIR), when set, receives each
	// partition as a gzip CSV file before it is dropped.
	JournalExportDir string
	// Webhooks are the endpoints of RECKON_WEBHOOKS or
	// RECKON_WEBHOOKS_FILE; WebhooksSet says one of them is set (an empty
	// list included), so that the process's publisher delivers and
	// registers exactly these (docs/production.md#webhooks).
	Webhooks    []Webhook
	WebhooksSet bool
}

// Warnings lists what the configuration allows but an operator should
// hear about at start-up, each a sentence naming the variables: settings
// that start, and have started before, but cost what the operator may not
// expect. They are warnings rather than errors so that a configuration
// that ran yesterday still starts.
func (c Config) Warnings() []string {
	var w []string
	if c.EvidenceRetention < c.OperationsWindow {
		// Kernel operations stay listed (and walled) for the whole window,
		// and their probes read the evidence: pruned earlier, a probe that
		// could have proven the effect says inconclusive instead.
		w = append(w, fmt.Sprintf("RECKON_EVIDENCE_RETENTION (%s) is shorter than RECKON_OPERATIONS_WINDOW (%s): workspace manifests and MCP prior states of operations still listed are deleted, and their probes say inconclusive instead of proving an effect; set the retention to at least the window", c.EvidenceRetention, c.OperationsWindow))
	}
	return w
}

// MinEvidenceRetention is the shortest RECKON_EVIDENCE_RETENTION accepted:
// a shorter one would delete evidence before a sweep (every 5m by default)
// could read it, leaving every such probe inconclusive.
const MinEvidenceRetention = time.Hour

// DefaultSweepLease is RECKON_SWEEP_LEASE's default.
const DefaultSweepLease = 30 * time.Second

// MinSweepLease is the shortest RECKON_SWEEP_LEASE accepted: renewed every
// third of it, a shorter lease would be renewed more often than a second.
const MinSweepLease = 3 * time.Second

// DefaultAwaitTimeout is RECKON_AWAIT_TIMEOUT's default: a weekend.
const DefaultAwaitTimeout = 72 * time.Hour

// DefaultToolHeartbeatTimeout is RECKON_TOOL_HEARTBEAT_TIMEOUT's default.
const DefaultToolHeartbeatTimeout = 10 * time.Second

// Error is a configuration error naming its variable.
type Error struct {
	Var, Problem string
}

func (e *Error) Error() string { return fmt.Sprintf("configuration: %s %s", e.Var, e.Problem) }

// Load reads the configuration from the environment.
func Load() (Config, error) { return LoadFrom(os.Getenv) }

// LoadFrom reads the configuration through getenv (tests pass a map).
func LoadFrom(getenv func(string) string) (Config, error) {
	get := func(k, def string) string {
		if v := strings.TrimSpace(getenv(k)); v != "" {
			return v
		}
		return def
	}
	c := Config{
		DatabaseURL:       get("DATABASE_URL", DefaultDatabaseURL),
		TemporalAddress:   get("TEMPORAL_ADDRESS", ""),
		TemporalNamespace: get("TEMPORAL_NAMESPACE", "default"),
		TaskQueue:         get("RECKON_TASK_QUEUE", "reckon-runs"),
		HTTPAddr:          get("RECKON_HTTP_ADDR", "127.0.0.1:8080"),
		MetricsAddr:       get("RECKON_METRICS_ADDR", ""),
		TLSCertFile:       get("RECKON_TLS_CERT_FILE", ""),
		TLSKeyFile:        get("RECKON_TLS_KEY_FILE", ""),
		Tokens:            get("RECKON_TOKENS", ""),
		TokensFile:        get("RECKON_TOKENS_FILE", ""),
		DataDir:           get("RECKON_DATA_DIR", "./.reckon"),
		TriageSchedule:    get("RECKON_TRIAGE_SCHEDULE", "@every 5m"),
		SupervisorBaseURL: get("RECKON_SUPERVISOR_BASE_URL", ""),
		SupervisorAPIKey:  get("RECKON_SUPERVISOR_API_KEY", ""),
		SupervisorModel:   get("RECKON_SUPERVISOR_MODEL", ""),
		SupervisorSettle:  get("RECKON_SUPERVISOR_SETTLE", "evidence"),
		FaultAfterEffect:  get("KERNEL_FAULT_AFTER_EFFECT", ""),
		FaultBeforeEffect: get("KERNEL_FAULT_BEFORE_EFFECT", ""),
		LogLevel:          get("RECKON_LOG_LEVEL", "info"),
		LogFormat:         get("RECKON_LOG_FORMAT", ""),
		MCPServers:        get("RECKON_MCP_SERVERS", ""),
		AgentBaseURL:      get("RECKON_AGENT_BASE_URL", ""),
		AgentAPIKey:       get("RECKON_AGENT_API_KEY", ""),
		AgentModel:        get("RECKON_AGENT_MODEL", ""),
		ProbeContracts:    get("RECKON_PROBE_CONTRACTS", ""),
		JournalExportDir:  get("RECKON_JOURNAL_EXPORT_DIR", ""),
	}
	for _, name := range strings.Split(get("RECKON_GUARD_EXEMPT", ""), ",") {
		if name = strings.TrimSpace(name); name != "" {
			c.GuardExempt = append(c.GuardExempt, name)
		}
	}
	var err error
	if c.OperationsWindow, err = duration(get, "RECKON_OPERATIONS_WINDOW", "168h"); err != nil {
		return Config{}, err
	}
	if c.StaleAfter, err = duration(get, "RECKON_STALE_AFTER", "10m"); err != nil {
		return Config{}, err
	}
	if c.ToolHeartbeatTimeout, err = duration(get, "RECKON_TOOL_HEARTBEAT_TIMEOUT", DefaultToolHeartbeatTimeout.String()); err != nil {
		return Config{}, err
	}
	if c.ToolHeartbeatTimeout < time.Second {
		return Config{}, &Error{"RECKON_TOOL_HEARTBEAT_TIMEOUT", fmt.Sprintf("must be at least 1s (a worker heartbeats every fifth of it), got %q", get("RECKON_TOOL_HEARTBEAT_TIMEOUT", ""))}
	}
	if c.AwaitTimeout, err = duration(get, "RECKON_AWAIT_TIMEOUT", DefaultAwaitTimeout.String()); err != nil {
		return Config{}, err
	}
	if c.AwaitTimeout < time.Second {
		return Config{}, &Error{"RECKON_AWAIT_TIMEOUT", fmt.Sprintf("must be at least 1s, got %q", get("RECKON_AWAIT_TIMEOUT", ""))}
	}
	if c.SweepLease, err = duration(get, "RECKON_SWEEP_LEASE", DefaultSweepLease.String()); err != nil {
		return Config{}, err
	}
	if c.SweepLease < MinSweepLease {
		return Config{}, &Error{"RECKON_SWEEP_LEASE", fmt.Sprintf("must be at least %s (a process renews its lease every third of it), got %q", MinSweepLease, get("RECKON_SWEEP_LEASE", ""))}
	}
	if _, err := cron.ParseStandard(c.TriageSchedule); err != nil {
		return Config{}, &Error{"RECKON_TRIAGE_SCHEDULE", fmt.Sprintf("is not a cron spec (e.g. \"@every 5m\" or \"*/5 * * * *\"): %v", err)}
	}
	switch c.LogFormat {
	case "", "json", "console":
	default:
		return Config{}, &Error{"RECKON_LOG_FORMAT", fmt.Sprintf("must be json or console, got %q", c.LogFormat)}
	}
	switch strings.ToLower(c.LogLevel) {
	case "trace", "debug", "info", "warn", "error", "fatal", "panic", "disabled":
	default:
		return Config{}, &Error{"RECKON_LOG_LEVEL", fmt.Sprintf("must be one of trace, debug, info, warn, error, got %q", c.LogLevel)}
	}
	switch v := get("RECKON_SANDBOX_UNCONFINED", ""); v {
	case "", "0", "false":
	case "1", "true":
		c.SandboxUnconfined = true
	default:
		return Config{}, &Error{"RECKON_SANDBOX_UNCONFINED", fmt.Sprintf("must be 1 or 0, got %q", v)}
	}
	v := get("RECKON_HTTP_MAX_CONNS_PER_CLIENT", "128")
	if c.HTTPMaxConnsPerClient, err = strconv.Atoi(v); err != nil || c.HTTPMaxConnsPerClient < 0 {
		return Config{}, &Error{"RECKON_HTTP_MAX_CONNS_PER_CLIENT", fmt.Sprintf("must be a whole number, 0 for no cap, got %q", v)}
	}
	if c.SandboxMaxProcs, err = count(get, "RECKON_SANDBOX_MAX_PROCS", 256, 16); err != nil {
		return Config{}, err
	}
	if c.SandboxMaxMemory, err = size(get, "RECKON_SANDBOX_MAX_MEMORY", "1GiB", 64<<20); err != nil {
		return Config{}, err
	}
	if c.SandboxMaxFileSize, err = size(get, "RECKON_SANDBOX_MAX_FILE_SIZE", "1GiB", 1<<20); err != nil {
		return Config{}, err
	}
	if c.ManifestBudget, err = duration(get, "RECKON_MANIFEST_BUDGET", "10s"); err != nil {
		return Config{}, err
	}
	if c.EvidenceRetention, err = duration(get, "RECKON_EVIDENCE_RETENTION", "720h"); err != nil {
		return Config{}, err
	}
	if c.EvidenceRetention < MinEvidenceRetention {
		return Config{}, &Error{"RECKON_EVIDENCE_RETENTION", fmt.Sprintf("must be at least %s (evidence must outlive a sweep to be read), got %q", MinEvidenceRetention, get("RECKON_EVIDENCE_RETENTION", ""))}
	}
	if c.JournalRetention, err = journalRetention(get, c.OperationsWindow); err != nil {
		return Config{}, err
	}
	v = get("RECKON_MANIFEST_MAX_FILES", "100000")
	if c.ManifestMaxFiles, err = strconv.Atoi(v); err != nil || c.ManifestMaxFiles < 1 {
		return Config{}, &Error{"RECKON_MANIFEST_MAX_FILES", fmt.Sprintf("must be a whole number of at least 1, got %q", v)}
	}
	if c.SandboxUID, c.SandboxGID, err = identity(get("RECKON_SANDBOX_UID", "65534:65534")); err != nil {
		return Config{}, err
	}
	switch c.SupervisorSettle {
	case "evidence", "inference":
	default:
		return Config{}, &Error{"RECKON_SUPERVISOR_SETTLE", fmt.Sprintf("must be evidence (settle only what a probe or a kernel fact proves) or inference (settle a supervisor's inferences too), got %q", c.SupervisorSettle)}
	}
	if (c.TLSCertFile == "") != (c.TLSKeyFile == "") {
		return Config{}, &Error{"RECKON_TLS_CERT_FILE", "and RECKON_TLS_KEY_FILE must be set together (both unset serves plain HTTP)"}
	}
	if (c.AgentBaseURL == "") != (c.AgentModel == "") {
		return Config{}, &Error{"RECKON_AGENT_MODEL", "and RECKON_AGENT_BASE_URL must be set together (both unset refuses agent runs)"}
	}
	if c.AgentAPIKey != "" && c.AgentBaseURL == "" {
		return Config{}, &Error{"RECKON_AGENT_API_KEY", "is set without RECKON_AGENT_BASE_URL and RECKON_AGENT_MODEL"}
	}
	if (c.SupervisorBaseURL == "") != (c.SupervisorModel == "") {
		return Config{}, &Error{"RECKON_SUPERVISOR_MODEL", "and RECKON_SUPERVISOR_BASE_URL must be set together (both unset selects the built-in supervisor)"}
	}
	// Made absolute once, here: workspace paths go into workflow inputs,
	// MCP server arguments ({workspace}) and probes, and a relative one is
	// read against whichever directory the reader runs in (an MCP server
	// started in its own package directory resolved it there and failed).
	abs, err := filepath.Abs(c.DataDir)
	if err != nil {
		return Config{}, &Error{"RECKON_DATA_DIR", fmt.Sprintf("cannot be made absolute: %v (got %q)", err, c.DataDir)}
	}
	c.DataDir = abs
	if c.Webhooks, c.WebhooksSet, err = loadWebhooks(get); err != nil {
		return Config{}, err
	}
	return c, nil
}

// journalRetention reads RECKON_JOURNAL_RETENTION: unset or 0 keeps the
// journal whole; otherwise a duration of at least the operations window,
// since a shorter one would drop the events of operations still listed
// (their tool.started is inside the window). TestJournalRetention.
func journalRetention(get func(string, string) string, window time.Duration) (time.Duration, error) {
	v := get("RECKON_JOURNAL_RETENTION", "0")
	d, err := time.ParseDuration(v)
	if err != nil || d < 0 {
		return 0, &Error{"RECKON_JOURNAL_RETENTION", fmt.Sprintf("is not a Go duration of 0 (off) or more (e.g. 2160h): %q", v)}
	}
	if d > 0 && d < window {
		return 0, &Error{"RECKON_JOURNAL_RETENTION", fmt.Sprintf("must be at least RECKON_OPERATIONS_WINDOW (%s), or 0 (off): a shorter one would drop the events of operations still listed; got %q", window, v)}
	}
	return d, nil
}

func duration(get func(string, string) string, k, def string) (time.Duration, error) {
	v := get(k, def)
	d, err := time.ParseDuration(v)
	if err != nil {
		return 0, &Error{k, fmt.Sprintf("is not a Go duration (e.g. 168h, 10m): %q", v)}
	}
	if d <= 0 {
		return 0, &Error{k, fmt.Sprintf("must be positive, got %q", v)}
	}
	return d, nil
}

func count(get func(string, string) string, k string, def, minimum int) (int, error) {
	v := get(k, strconv.Itoa(def))
	n, err := strconv.Atoi(v)
	if err != nil {
		return 0, &Error{k, fmt.Sprintf("is not a whole number: %q", v)}
	}
	if n < minimum {
		return 0, &Error{k, fmt.Sprintf("must be at least %d (a shell and its pipeline need a few processes), got %d", minimum, n)}
	}
	return n, nil
}

// sizeUnits are the suffixes ParseSize accepts, all powers of 1024.
var sizeUnits = map[string]int64{
	"": 1, "b": 1,
	"k": 1 << 10, "kb": 1 << 10, "kib": 1 << 10,
	"m": 1 << 20, "mb": 1 << 20, "mib": 1 << 20,
	"g": 1 << 30, "gb": 1 << 30, "gib": 1 << 30,
	"t": 1 << 40, "tb": 1 << 40, "tib": 1 << 40,
}

// ParseSize reads a byte count: plain bytes (1073741824) or a whole number
// with a unit, K, M, G or T, optionally followed by B or iB, any case; all
// units are powers of 1024 (512MiB, 512M and 512MB are the same).
func ParseSize(v string) (int64, error) {
	v = strings.TrimSpace(v)
	i := 0
	for i < len(v) && v[i] >= '0' && v[i] <= '9' {
		i++
	}
	if i == 0 {
		return 0, fmt.Errorf("%q is not a size (bytes, or a number with K, M, G or T: 512MiB, 1GiB)", v)
	}
	unit, ok := sizeUnits[strings.ToLower(strings.TrimSpace(v[i:]))]
	if !ok {
		return 0, fmt.Errorf("%q has an unknown unit (use K, M, G or T, optionally followed by B or iB: 512MiB, 1GiB)", v)
	}
	n, err := strconv.ParseInt(v[:i], 10, 64)
	if err != nil || n > math.MaxInt64/unit {
		return 0, fmt.Errorf("%q is too large", v)
	}
	return n * unit, nil
}

func size(get func(string, string) string, k, def string, minimum int64) (int64, error) {
	n, err := ParseSize(get(k, def))
	if err != nil {
		return 0, &Error{k, err.Error()}
	}
	if n < minimum {
		return 0, &Error{k, fmt.Sprintf("must be at least %d bytes (%d MiB), got %d", minimum, minimum>>20, n)}
	}
	return n, nil
}

// identity reads uid[:gid] (gid defaults to uid). 0 is refused: the point
// is an unprivileged user.
func identity(v string) (uint32, uint32, error) {
	us, gs, hasGID := strings.Cut(v, ":")
	if !hasGID {
		gs = us
	}
	uid, err1 := strconv.ParseUint(us, 10, 32)
	gid, err2 := strconv.ParseUint(gs, 10, 32)
	switch {
	case err1 != nil || err2 != nil:
		return 0, 0, &Error{"RECKON_SANDBOX_UID", fmt.Sprintf("must be uid or uid:gid as numbers, got %q", v)}
	case uid == 0 || gid == 0:
		return 0, 0, &Error{"RECKON_SANDBOX_UID", fmt.Sprintf("must name an unprivileged user, not root: got %q", v)}
	}
	return uint32(uid), uint32(gid), nil
}
