package soak

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// pgBinaries are the PostgreSQL programs the soak runs.
var pgBinaries = []string{"initdb", "pg_ctl", "postgres"}

// FindPGBin returns the directory holding initdb, pg_ctl and postgres:
// explicit when given, else the directory of pg_ctl on PATH (symlinks
// resolved), else the newest /usr/lib/postgresql/<version>/bin. The error
// says how to get them.
func FindPGBin(explicit string) (string, error) {
	var candidates []string
	if explicit != "" {
		candidates = []string{explicit}
	} else {
		if p, err := exec.LookPath("pg_ctl"); err == nil {
			if r, err := filepath.EvalSymlinks(p); err == nil {
				p = r
			}
			candidates = append(candidates, filepath.Dir(p))
		}
		dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
		sort.Slice(dirs, func(i, j int) bool { return pgVersion(dirs[i]) > pgVersion(dirs[j]) })
		candidates = append(candidates, dirs...)
	}
	for _, dir := range candidates {
		if hasPGBinaries(dir) {
			return dir, nil
		}
	}
	if explicit != "" {
		return "", fmt.Errorf("--pg-bin %s does not hold %s", explicit, strings.Join(pgBinaries, ", "))
	}
	return "", errors.New("no PostgreSQL server binaries (initdb, pg_ctl, postgres) found on PATH or in /usr/lib/postgresql/*/bin: " +
		"install them (apt-get install -y postgresql; `make soak` does this) or pass --pg-bin DIR")
}

func hasPGBinaries(dir string) bool {
	for _, b := range pgBinaries {
		if st, err := os.Stat(filepath.Join(dir, b)); err != nil || st.IsDir() || st.Mode()&0o111 == 0 {
			return false
		}
	}
	return true
}

// pgVersion is the major version in /usr/lib/postgresql/<version>/bin.
func pgVersion(binDir string) int {
	v, _ := strconv.Atoi(filepath.Base(filepath.Dir(binDir)))
	return v
}

// Cluster is a private PostgreSQL cluster the soak creates, restarts and
// drops: its own data directory, port and unix socket directory under a
// temporary directory. It is never the machine's main cluster, so stopping
// it with -m immediate harms nobody.
type Cluster struct {
	BinDir string
	Root   string // temporary directory: data/, the socket, the log
	Port   int
	// cred runs the server programs as an unprivileged user when the soak
	// runs as root (PostgreSQL refuses to run as root).
	cred *syscall.Credential
}

// clusterPrefix names the soak's temporary cluster directories, so a later
// soak can find and drop those a killed soak left behind.
const clusterPrefix = "reckon-soak-pg-"

// ownerFile holds the pid of the soak that owns a cluster directory.
const ownerFile = "soak.pid"

// superuser is the cluster's superuser role (trust authentication on
// 127.0.0.1 only).
const superuser = "soak"

// NewCluster runs initdb into a fresh temporary directory and configures
// the cluster to listen on 127.0.0.1 only, on a free port, with its socket
// in that directory. It does not start it.
func NewCluster(ctx context.Context, binDir string) (*Cluster, error) {
	root, err := os.MkdirTemp("", clusterPrefix)
	if err != nil {
		return nil, fmt.Errorf("private cluster: %w", err)
	}
	c := &Cluster{BinDir: binDir, Root: root}
	fail := func(err error) (*Cluster, error) {
		_ = os.RemoveAll(root)
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(root, ownerFile), []byte(strconv.Itoa(os.Getpid())), 0o644); err != nil {
		return fail(err)
	}
	if os.Geteuid() == 0 {
		cred, err := unprivileged()
		if err != nil {
			return fail(err)
		}
		c.cred = cred
		if err := os.Chown(root, int(cred.Uid), int(cred.Gid)); err != nil {
			return fail(fmt.Errorf("private cluster: chown %s: %w", root, err))
		}
	}
	port, err := freePort()
	if err != nil {
		return fail(err)
	}
	c.Port = port
	if out, err := c.run(ctx, "initdb", "-D", c.DataDir(), "-U", superuser, "--auth=trust", "-E", "UTF8",
		"--locale=C", "--no-instructions", "--no-sync"); err != nil {
		return fail(fmt.Errorf("initdb: %w: %s", err, out))
	}
	conf := fmt.Sprintf(`
# reckon soak: a private cluster on the loopback only.
listen_addresses = '127.0.0.1'
port = %d
unix_socket_directories = '%s'
max_connections = 200
shared_buffers = 64MB
logging_collector = off
log_min_messages = warning
`, port, root)
	f, err := os.OpenFile(filepath.Join(c.DataDir(), "postgresql.conf"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		return fail(fmt.Errorf("private cluster config: %w", err))
	}
	_, werr := io.WriteString(f, conf)
	if err := errors.Join(werr, f.Close()); err != nil {
		return fail(fmt.Errorf("private cluster config: %w", err))
	}
	return c, nil
}

// unprivileged is the user the server runs as under root: postgres when
// the system has one, else nobody.
func unprivileged() (*syscall.Credential, error) {
	for _, name := range []string{"postgres", "nobody"} {
		u, err := user.Lookup(name)
		if err != nil {
			continue
		}
		uid, err1 := strconv.Atoi(u.Uid)
		gid, err2 := strconv.Atoi(u.Gid)
		if err1 == nil && err2 == nil {
			return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
		}
	}
	return nil, errors.New("running as root, and neither a postgres nor a nobody user exists to run the private PostgreSQL cluster as (PostgreSQL refuses root)")
}

// DataDir is the cluster's data directory.
func (c *Cluster) DataDir() string { return filepath.Join(c.Root, "data") }

// LogFile is the server's log.
func (c *Cluster) LogFile() string { return filepath.Join(c.Root, "postgres.log") }

// URL is the connection URL of database db over TCP on 127.0.0.1.
func (c *Cluster) URL(db string) string {
	return fmt.Sprintf("postgres://%s@127.0.0.1:%d/%s?sslmode=disable", superuser, c.Port, db)
}

// Start starts the server and waits until it accepts connections.
func (c *Cluster) Start(ctx context.Context) error {
	if out, err := c.run(ctx, "pg_ctl", "-D", c.DataDir(), "-l", c.LogFile(), "-w", "-t", "120", "start"); err != nil {
		return fmt.Errorf("pg_ctl start: %w: %s", err, out)
	}
	return nil
}

// Stop stops the server in mode immediate (a crash: no checkpoint, crash
// recovery at the next start) or fast.
func (c *Cluster) Stop(ctx context.Context, immediate bool) error {
	mode := "fast"
	if immediate {
		mode = "immediate"
	}
	if out, err := c.run(ctx, "pg_ctl", "-D", c.DataDir(), "-m", mode, "-w", "-t", "60", "stop"); err != nil {
		return fmt.Errorf("pg_ctl stop -m %s: %w: %s", mode, err, out)
	}
	return nil
}

// Drop stops the server (immediately; nothing in it is kept) and removes
// the cluster's directory. keepLog, when set, receives a copy of the
// server's log first.
func (c *Cluster) Drop(keepLog string) error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var errs []error
	if _, err := os.Stat(filepath.Join(c.DataDir(), "postmaster.pid")); err == nil {
		errs = append(errs, c.Stop(ctx, true))
	}
	if keepLog != "" {
		if b, err := os.ReadFile(c.LogFile()); err == nil {
			errs = append(errs, os.WriteFile(keepLog, b, 0o644))
		}
	}
	errs = append(errs, os.RemoveAll(c.Root))
	return errors.Join(errs...)
}

// run runs one of the cluster's programs as the cluster's user.
func (c *Cluster) run(ctx context.Context, prog string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, filepath.Join(c.BinDir, prog), args...)
	cmd.Dir = c.Root
	cmd.Env = append(os.Environ(), "LC_ALL=C", "PGTZ=UTC")
	// A process group of its own: a Ctrl-C at the terminal goes to the
	// soak, which stops the cluster itself.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Credential: c.cred}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return strings.TrimSpace(out.String()), err
}

// DropStaleClusters stops and removes private clusters that soaks killed
// before they could drop them (their owner pid is gone), and says which.
func DropStaleClusters(binDir string) []string {
	dirs, _ := filepath.Glob(filepath.Join(os.TempDir(), clusterPrefix+"*"))
	var dropped []string
	for _, dir := range dirs {
		b, err := os.ReadFile(filepath.Join(dir, ownerFile))
		if err != nil {
			continue
		}
		pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
		if err != nil || pid <= 0 || alive(pid) {
			continue
		}
		c := &Cluster{BinDir: binDir, Root: dir}
		if os.Geteuid() == 0 {
			c.cred, _ = unprivileged()
		}
		if c.Drop("") == nil {
			dropped = append(dropped, dir)
		}
	}
	return dropped
}

// alive says whether a process with this pid exists.
func alive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

// freePort returns a TCP port on 127.0.0.1 that was free a moment ago.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("find a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
