// Package config reads reckon's configuration from the environment exactly
// as DESIGN.md's "Configuration" table names it. A bad value stops start-up
// with one line naming the variable and what is wrong.
package config

import (
	"fmt"
	"os"
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
	Tokens            string // RECKON_TOKENS
	TokensFile        string // RECKON_TOKENS_FILE
	DataDir           string
	OperationsWindow  time.Duration
	StaleAfter        time.Duration
	TriageSchedule    string
	SupervisorBaseURL string
	SupervisorAPIKey  string
	SupervisorModel   string
	FaultAfterEffect  string
	FaultBeforeEffect string
	LogLevel          string
	LogFormat         string // json | console | "" (console on a TTY)
	// SandboxUnconfined allows run_command without bubblewrap
	// (RECKON_SANDBOX_UNCONFINED=1); every event then says so.
	SandboxUnconfined bool
	// MCPServers configures MCP servers (RECKON_MCP_SERVERS), see README.
	MCPServers string
	// ToolHeartbeatTimeout (RECKON_TOOL_HEARTBEAT_TIMEOUT) is how long a
	// tool call may go without a heartbeat before its worker counts as
	// dead and the call ends tool.failed(effect=uncertain). It bounds how
	// long a dead worker's operation stays invisible. Runs carry the value
	// of the process that started them.
	ToolHeartbeatTimeout time.Duration
}

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
		Tokens:            get("RECKON_TOKENS", ""),
		TokensFile:        get("RECKON_TOKENS_FILE", ""),
		DataDir:           get("RECKON_DATA_DIR", "./.reckon"),
		TriageSchedule:    get("RECKON_TRIAGE_SCHEDULE", "@every 5m"),
		SupervisorBaseURL: get("RECKON_SUPERVISOR_BASE_URL", ""),
		SupervisorAPIKey:  get("RECKON_SUPERVISOR_API_KEY", ""),
		SupervisorModel:   get("RECKON_SUPERVISOR_MODEL", ""),
		FaultAfterEffect:  get("KERNEL_FAULT_AFTER_EFFECT", ""),
		FaultBeforeEffect: get("KERNEL_FAULT_BEFORE_EFFECT", ""),
		LogLevel:          get("RECKON_LOG_LEVEL", "info"),
		LogFormat:         get("RECKON_LOG_FORMAT", ""),
		MCPServers:        get("RECKON_MCP_SERVERS", ""),
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
	if (c.SupervisorBaseURL == "") != (c.SupervisorModel == "") {
		return Config{}, &Error{"RECKON_SUPERVISOR_MODEL", "and RECKON_SUPERVISOR_BASE_URL must be set together (both unset selects the built-in supervisor)"}
	}
	return c, nil
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
