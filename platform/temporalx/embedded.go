// Package temporalx connects reckon to Temporal: either an external cluster
// (TEMPORAL_ADDRESS) or an embedded, real Temporal server started in-process
// on SQLite (a file under the data directory for dev, memory for tests). It
// also adapts zerolog to the loggers of the Temporal SDK and server.
//
// The embedded server is adapted from go.temporal.io/server's
// temporaltest/internal/lite_server.go (MIT licence), which is internal to
// that module and cannot be imported.
package temporalx

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/rs/zerolog"
	"go.temporal.io/server/common/authorization"
	"go.temporal.io/server/common/cluster"
	"go.temporal.io/server/common/config"
	"go.temporal.io/server/common/dynamicconfig"
	sqliteplugin "go.temporal.io/server/common/persistence/sql/sqlplugin/sqlite"
	"go.temporal.io/server/schema/sqlite"
	"go.temporal.io/server/temporal"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// EmbeddedConfig configures an embedded server.
type EmbeddedConfig struct {
	// DBFile persists state in this SQLite file (created and migrated when
	// missing). Empty keeps everything in memory: state dies with the
	// process, which is what tests want.
	DBFile string
	// Namespaces are registered at start; "default" when empty.
	Namespaces []string
	// Log receives the server's own logs; Connect passes errors only, the
	// server being chatty even at warn level (shutdown, membership).
	Log zerolog.Logger
}

// Embedded is a running in-process Temporal server.
type Embedded struct {
	srv      temporal.Server
	hostPort string
	stopping *atomic.Bool // quiets the server's shutdown errors
	ports    *portReservation
}

const localhost = "127.0.0.1"

// StartEmbedded starts a real Temporal server (frontend, history, matching
// and worker services) in this process and returns once it serves.
func StartEmbedded(cfg EmbeddedConfig) (*Embedded, error) {
	if len(cfg.Namespaces) == 0 {
		cfg.Namespaces = []string{"default"}
	}
	// The frontend's gRPC port, 3 more gRPC ports and 4 membership ports.
	ports, reserved, err := freePorts(localhost, 8)
	if err != nil {
		return nil, err
	}
	started := false
	defer func() {
		if !started {
			reserved.release()
		}
	}()
	sqlCfg, err := sqliteConfig(cfg.DBFile)
	if err != nil {
		return nil, err
	}
	frontend := fmt.Sprintf("%s:%d", localhost, ports[0])
	sc := serverConfig(sqlCfg, frontend, ports)
	if err := registerNamespaces(sqlCfg, cfg.Namespaces); err != nil {
		return nil, err
	}
	stopping := new(atomic.Bool)
	srv, err := newServer(sc, serverLogger{l: cfg.Log, stopping: stopping})
	if err != nil {
		return nil, err
	}
	if err := srv.Start(); err != nil {
		return nil, fmt.Errorf("embedded temporal: start: %w", err)
	}
	// The frontend answers "not healthy yet" for a moment after Start (and
	// logs each such call as a service failure): wait until its gRPC health
	// check says SERVING before handing the server out.
	if err := waitServing(frontend, 20*time.Second); err != nil {
		_ = srv.Stop()
		return nil, fmt.Errorf("embedded temporal: %w", err)
	}
	started = true
	return &Embedded{srv: srv, hostPort: frontend, stopping: stopping, ports: reserved}, nil
}

// sqliteConfig is the server's SQLite store: a private shared-cache memory
// database when dbFile is empty, else dbFile, created with Temporal's
// schema when missing and cleared of stale cluster members when not.
func sqliteConfig(dbFile string) (*config.SQL, error) {
	sqlCfg := &config.SQL{
		PluginName:        sqliteplugin.PluginName,
		ConnectAttributes: map[string]string{},
		DatabaseName:      dbFile,
	}
	if dbFile == "" {
		sqlCfg.ConnectAttributes["mode"] = "memory"
		sqlCfg.ConnectAttributes["cache"] = "shared"
		// Shared-cache memory databases are process-global by name: a
		// unique name keeps two servers of one process apart.
		sqlCfg.DatabaseName = fmt.Sprintf("reckon-%d-%d", os.Getpid(), time.Now().UnixNano())
		return sqlCfg, nil
	}
	sqlCfg.ConnectAttributes["mode"] = "rwc"
	sqlCfg.ConnectAttributes["_journal_mode"] = "WAL"
	if err := os.MkdirAll(filepath.Dir(dbFile), 0o755); err != nil {
		return nil, fmt.Errorf("embedded temporal: create directory of %s: %w", dbFile, err)
	}
	if _, err := os.Stat(dbFile); errors.Is(err, os.ErrNotExist) {
		if err := sqlite.SetupSchema(sqlCfg); err != nil {
			return nil, fmt.Errorf("embedded temporal: set up SQLite schema in %s: %w", dbFile, err)
		}
	} else if err := forgetMembers(dbFile); err != nil {
		return nil, fmt.Errorf("embedded temporal: %w", err)
	}
	return sqlCfg, nil
}

// serverConfig is a one-node cluster on sqlCfg: the frontend at frontend
// (ports[0]), the other services' gRPC ports ports[1:4], the membership
// ports ports[4:8], archival off.
func serverConfig(sqlCfg *config.SQL, frontend string, ports []int) *config.Config {
	sc := &config.Config{}
	sc.Global.Membership = config.Membership{MaxJoinDuration: 30 * time.Second, BroadcastAddress: localhost}
	sc.Persistence = config.Persistence{
		DefaultStore:     sqliteplugin.PluginName,
		VisibilityStore:  sqliteplugin.PluginName,
		NumHistoryShards: 1,
		DataStores:       map[string]config.DataStore{sqliteplugin.PluginName: {SQL: sqlCfg}},
	}
	sc.ClusterMetadata = &cluster.Config{
		EnableGlobalNamespace:    false,
		FailoverVersionIncrement: 10,
		MasterClusterName:        "active",
		CurrentClusterName:       "active",
		ClusterInformation: map[string]cluster.ClusterInformation{
			"active": {Enabled: true, InitialFailoverVersion: 1, RPCAddress: frontend},
		},
	}
	sc.DCRedirectionPolicy = config.DCRedirectionPolicy{Policy: "noop"}
	service := func(grpc, membership int) config.Service {
		return config.Service{RPC: config.RPC{GRPCPort: grpc, MembershipPort: membership, BindOnLocalHost: true}}
	}
	sc.Services = map[string]config.Service{
		"frontend": service(ports[0], ports[4]),
		"history":  service(ports[1], ports[5]),
		"matching": service(ports[2], ports[6]),
		"worker":   service(ports[3], ports[7]),
	}
	sc.Archival = config.Archival{
		History:    config.HistoryArchival{State: "disabled"},
		Visibility: config.VisibilityArchival{State: "disabled"},
	}
	// The server's internal worker dials its own frontend through this.
	sc.PublicClient = config.PublicClient{HostPort: frontend}
	sc.NamespaceDefaults = config.NamespaceDefaults{Archival: config.ArchivalNamespaceDefaults{
		History:    config.HistoryArchivalNamespaceDefaults{State: "disabled"},
		Visibility: config.VisibilityArchivalNamespaceDefaults{State: "disabled"},
	}}
	return sc
}

// registerNamespaces writes the namespaces into the store.
func registerNamespaces(sqlCfg *config.SQL, names []string) error {
	var nss []*sqlite.NamespaceConfig
	for _, ns := range names {
		nc, err := sqlite.NewNamespaceConfig("active", ns, false, nil)
		if err != nil {
			return fmt.Errorf("embedded temporal: namespace %q: %w", ns, err)
		}
		nss = append(nss, nc)
	}
	if err := sqlite.CreateNamespaces(sqlCfg, nss...); err != nil {
		return fmt.Errorf("embedded temporal: register namespaces: %w", err)
	}
	return nil
}

// newServer builds the server of sc, its dynamic configuration tuned for
// one node.
func newServer(sc *config.Config, logger serverLogger) (temporal.Server, error) {
	authorizer, err := authorization.GetAuthorizerFromConfig(&sc.Global.Authorization)
	if err != nil {
		return nil, fmt.Errorf("embedded temporal: authorizer: %w", err)
	}
	claimMapper, err := authorization.GetClaimMapperFromConfig(&sc.Global.Authorization, logger)
	if err != nil {
		return nil, fmt.Errorf("embedded temporal: claim mapper: %w", err)
	}
	srv, err := temporal.NewServer(
		temporal.WithConfig(sc),
		temporal.ForServices(temporal.DefaultServices),
		temporal.WithLogger(logger),
		temporal.WithAuthorizer(authorizer),
		temporal.WithClaimMapper(func(*config.Config) authorization.ClaimMapper { return claimMapper }),
		temporal.WithDynamicConfigClient(oneNodeConfig()),
	)
	if err != nil {
		return nil, fmt.Errorf("embedded temporal: new server: %w", err)
	}
	return srv, nil
}

// oneNodeConfig is the server's dynamic configuration.
func oneNodeConfig() dynamicconfig.StaticClient {
	return dynamicconfig.StaticClient{
		dynamicconfig.ForceSearchAttributesCacheRefreshOnRead.Key(): []dynamicconfig.ConstrainedValue{{Value: true}},
		// One node: task queue partitions only add forwarding hops,
		// which showed up as multi-second pickup delays of new queues.
		dynamicconfig.MatchingNumTaskqueueReadPartitions.Key():  []dynamicconfig.ConstrainedValue{{Value: 1}},
		dynamicconfig.MatchingNumTaskqueueWritePartitions.Key(): []dynamicconfig.ConstrainedValue{{Value: 1}},
		// One history shard: the transfer queue's default 20 polls/s
		// is a per-shard limit meant for clusters of hundreds of
		// shards. Here every workflow shares the one shard, so after
		// the limiter's burst each workflow task waited ~45 ms to be
		// dispatched (read off the history: WorkflowTaskScheduled →
		// Started), three per tool call. Polls are cheap in-process.
		dynamicconfig.TransferProcessorMaxPollRPS.Key(): []dynamicconfig.ConstrainedValue{{Value: 2000}},
	}
}

// forgetMembers empties the membership table of an existing SQLite file.
// The embedded server is one process on fresh random ports each start, but
// the table keeps the previous starts' hosts for 48 hours; ringpop tried to
// join them, and for the first seconds after every restart matching and
// history answered "Not enough hosts to serve the request" (about 20 error
// lines, and workers' heartbeats refused). Nobody else can be a member: the
// file belongs to this process.
func forgetMembers(dbFile string) error {
	db, err := sql.Open("sqlite", "file:"+dbFile+"?_pragma=busy_timeout(5000)")
	if err != nil {
		return fmt.Errorf("open %s: %w", dbFile, err)
	}
	defer db.Close()
	if _, err := db.Exec(`DELETE FROM cluster_membership`); err != nil {
		return fmt.Errorf("clear stale cluster membership in %s: %w", dbFile, err)
	}
	return nil
}

// frontendService is the name the frontend registers its health under.
const frontendService = "temporal.api.workflowservice.v1.WorkflowService"

// waitServing polls the frontend's standard gRPC health service.
func waitServing(hostPort string, limit time.Duration) error {
	conn, err := grpc.NewClient(hostPort, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return fmt.Errorf("health check of %s: %w", hostPort, err)
	}
	defer conn.Close()
	hc := healthpb.NewHealthClient(conn)
	deadline := time.Now().Add(limit)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		resp, err := hc.Check(ctx, &healthpb.HealthCheckRequest{Service: frontendService})
		cancel()
		if err == nil && resp.GetStatus() == healthpb.HealthCheckResponse_SERVING {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("frontend %s not serving after %s (last: %v %v)", hostPort, limit, resp.GetStatus(), err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// HostPort is the frontend's address, for clients and workers of other
// processes.
func (e *Embedded) HostPort() string { return e.hostPort }

// stopWait bounds Stop. History, matching and persistence stop within a
// second or two; what can linger is the server's internal worker service
// retrying ShutdownWorker calls against an already stopped matching service
// (observed: 12s after a restart on an existing SQLite file). SQLite's
// journal keeps the file consistent whatever is left unfinished.
const stopWait = 5 * time.Second

// Stop shuts the server down, waiting at most a few seconds.
func (e *Embedded) Stop() error {
	e.stopping.Store(true)
	done := make(chan error, 1)
	go func() { done <- e.srv.Stop() }()
	select {
	case err := <-done:
		// The ports are free again only once the server has stopped; a
		// server still stopping past stopWait keeps them reserved until
		// the process exits.
		e.ports.release()
		if err != nil {
			return fmt.Errorf("embedded temporal: stop: %w", err)
		}
		return nil
	case <-time.After(stopWait):
		return nil
	}
}

// freePorts returns n distinct ports on host that were free a moment ago,
// drawn at random from below the kernel's ephemeral port range. The server
// binds them only later, so a port must not be one the kernel may hand out
// meanwhile to a :0 listener or an outgoing connection; ports below the
// range are taken only by explicit binds. Each port is also reserved
// (reservePort) until the server stops, so that two embedded servers
// starting at once never pick the same one between the check and the bind
// (a fatal error of the server). TestFreePortsSkipsReservedPorts.
func freePorts(host string, n int) ([]int, *portReservation, error) {
	lo, hi := belowEphemeral()
	return freePortsIn(host, n, lo, hi)
}

// freePortsIn is freePorts drawing from [lo, hi).
func freePortsIn(host string, n, lo, hi int) ([]int, *portReservation, error) {
	seen := map[int]bool{}
	ports := make([]int, 0, n)
	res := &portReservation{}
	for tries := 0; len(ports) < n; tries++ {
		if tries == 1000 {
			res.release()
			return nil, nil, fmt.Errorf("embedded temporal: no %d free ports on %s between %d and %d", n, host, lo, hi)
		}
		p := lo + rand.IntN(hi-lo)
		if seen[p] {
			continue
		}
		seen[p] = true
		lock, ok := reservePort(p)
		if !ok {
			continue // another server's
		}
		l, err := net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(p)))
		if err != nil {
			lock.release()
			continue // taken
		}
		_ = l.Close()
		ports = append(ports, p)
		res.locks = append(res.locks, lock)
	}
	return ports, res, nil
}

// portReservation holds the reservations of a server's ports.
type portReservation struct{ locks []portLock }

// release gives the ports back; safe on nil and more than once.
func (r *portReservation) release() {
	if r == nil {
		return
	}
	for _, l := range r.locks {
		l.release()
	}
	r.locks = nil
}

// portLock is one port's reservation: an exclusive flock on a file named
// after the port, in a directory every reckon process on the machine
// shares. flock locks belong to the open file, so they also keep two
// servers of one process apart, and the kernel drops them when a process
// dies, so a crashed test leaves nothing reserved. The files stay (an
// unlink races with another process opening the name); they are empty.
type portLock struct{ f *os.File }

// portLockDir is where the port files are.
var portLockDir = filepath.Join(os.TempDir(), "reckon-temporal-ports")

// reservePort reserves port p for this process, or says another server
// holds it. Where no lock file can be made (a read-only temporary
// directory), the port is taken as free: the listen check alone decides.
//
// The directory is shared by every user of the machine, like /tmp itself:
// made sticky and world-writable (each user's files are theirs), each file
// opened read-only (all flock needs; nothing is ever written) and never
// through a symbolic link, so a file another user planted there can at
// most hold its port, which is then skipped.
func reservePort(p int) (portLock, bool) {
	if err := os.Mkdir(portLockDir, 0o755); err == nil {
		_ = os.Chmod(portLockDir, 0o777|os.ModeSticky)
	} else if !errors.Is(err, fs.ErrExist) {
		return portLock{}, true
	}
	f, err := os.OpenFile(filepath.Join(portLockDir, strconv.Itoa(p)), os.O_CREATE|os.O_RDONLY|syscall.O_NOFOLLOW, 0o644)
	if err != nil {
		return portLock{}, true
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		_ = f.Close()
		return portLock{}, false
	}
	return portLock{f: f}, true
}

// release drops the reservation (closing the file releases its flock).
func (l portLock) release() {
	if l.f != nil {
		_ = l.f.Close()
	}
}

// belowEphemeral is the range to pick server ports from: 10000 up to the
// start of /proc/sys/net/ipv4/ip_local_port_range (Linux's default start
// is 32768, used when the file cannot be read or starts too low).
func belowEphemeral() (lo, hi int) {
	lo, hi = 10000, 32768
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		var first, last int
		if _, err := fmt.Sscan(string(b), &first, &last); err == nil && first >= lo+1000 {
			hi = first
		}
	}
	return lo, hi
}
