package temporalx

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	"github.com/rs/zerolog"
	"go.temporal.io/sdk/client"
)

// Config says where Temporal is.
type Config struct {
	// Address of an external cluster (TEMPORAL_ADDRESS). Empty starts an
	// embedded server.
	Address   string
	Namespace string
	// DataDir holds the embedded server's SQLite file (temporal.db). Empty
	// keeps the embedded server in memory.
	DataDir string
	Log     zerolog.Logger
}

// Conn is a Temporal client and, when embedded, the server behind it.
type Conn struct {
	Client    client.Client
	Namespace string
	// Embedded is nil when connected to an external cluster.
	Embedded *Embedded
}

// Close closes the client and stops an embedded server.
func (c *Conn) Close() {
	c.Client.Close()
	if c.Embedded != nil {
		_ = c.Embedded.Stop()
	}
}

// DBFile is the embedded server's SQLite file under dataDir.
func DBFile(dataDir string) string { return filepath.Join(dataDir, "temporal.db") }

// Connect dials an external cluster, or starts an embedded server and dials
// it.
func Connect(ctx context.Context, o Config) (*Conn, error) {
	if o.Namespace == "" {
		o.Namespace = "default"
	}
	conn := &Conn{Namespace: o.Namespace}
	addr := o.Address
	if addr == "" {
		ecfg := EmbeddedConfig{Namespaces: []string{o.Namespace}, Log: o.Log.With().Str("component", "temporal-server").Logger().Level(maxLevel(o.Log.GetLevel(), zerolog.ErrorLevel))}
		if o.DataDir != "" {
			abs, err := filepath.Abs(DBFile(o.DataDir))
			if err != nil {
				return nil, fmt.Errorf("embedded temporal: data dir %q: %w", o.DataDir, err)
			}
			ecfg.DBFile = abs
		}
		e, err := StartEmbedded(ecfg)
		if err != nil {
			return nil, err
		}
		conn.Embedded = e
		addr = e.HostPort()
	}
	c, err := Dial(ctx, addr, o.Namespace, o.Log)
	if err != nil {
		if conn.Embedded != nil {
			_ = conn.Embedded.Stop()
		}
		return nil, err
	}
	conn.Client = c
	return conn, nil
}

// Dial connects a client to addr and namespace, logging through log, and
// checks the connection within a bounded time.
func Dial(ctx context.Context, addr, namespace string, log zerolog.Logger) (client.Client, error) {
	dctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	c, err := client.DialContext(dctx, client.Options{
		HostPort:  addr,
		Namespace: namespace,
		Logger:    SDKLogger(log.With().Str("component", "temporal-sdk").Logger().Level(maxLevel(log.GetLevel(), zerolog.WarnLevel))),
	})
	if err != nil {
		return nil, fmt.Errorf("connect to Temporal at %s (TEMPORAL_ADDRESS), namespace %q: %w", addr, namespace, err)
	}
	return c, nil
}

func maxLevel(a, b zerolog.Level) zerolog.Level {
	if a > b {
		return a
	}
	return b
}
