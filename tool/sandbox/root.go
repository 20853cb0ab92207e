package sandbox

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// systemDirs are the top-level directories a shell and common tools need
// besides /usr. Each is bound read-only as it is on the host, or recreated
// as the same symlink where it is one (merged-/usr systems such as Debian
// 12 link /bin, /lib, /lib64 and /sbin into /usr); absent ones are
// skipped.
var systemDirs = []string{"/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"}

// etcFiles are the only entries of /etc the sandbox sees, read-only when
// the host has them: name resolution for localhost, the dynamic loader's
// cache, time zone, the alternatives links (awk, editor, …), TLS roots and
// a few tables libraries read. Never shadow, gshadow, sudoers, ssh keys or
// the host's passwd and group: those two are generated (identityFiles).
var etcFiles = []string{
	"/etc/hosts", "/etc/host.conf", "/etc/nsswitch.conf",
	"/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d",
	"/etc/localtime", "/etc/timezone",
	"/etc/alternatives",
	"/etc/ssl/certs", "/etc/ssl/openssl.cnf", "/etc/ca-certificates",
	"/etc/services", "/etc/protocols", "/etc/mime.types",
	"/etc/os-release", "/etc/debian_version", "/etc/locale.alias",
}

// shmSize bounds the sandbox's /dev/shm (a tmpfs, so RAM): POSIX shared
// memory and Python's multiprocessing locks live there.
const shmSize = 64 << 20

// bwrapArgs builds the sandbox: a fresh root holding only /usr and the
// system directories (read-only), the few /etc files above, generated
// passwd and group (fds 4 and 5), its init's PID reported on fd 6
// (sandboxInit), /proc of the sandbox's own pid
// namespace, a minimal /dev, a private /tmp and /dev/shm (tmpfs of bounded
// size), and the workspace read-write. The root and /dev are then made
// read-only, so nothing but the workspace and the two tmpfs takes a write.
// Every namespace is unshared (network included: the sandbox gets its own
// empty loopback; user: its process count and identity are its own; no
// nested user namespace), no capabilities, only env as environment. Order
// matters: /tmp is mounted before the workspace so a workspace under /tmp
// is bound on top of the tmpfs, not hidden by it.
func bwrapArgs(ws string, env []string, o Config) []string {
	a := []string{"--ro-bind", "/usr", "/usr"}
	for _, d := range systemDirs {
		fi, err := os.Lstat(d)
		switch {
		case err != nil:
		case fi.Mode()&fs.ModeSymlink != 0:
			if target, err := os.Readlink(d); err == nil {
				a = append(a, "--symlink", target, d)
			}
		case fi.IsDir():
			a = append(a, "--ro-bind", d, d)
		}
	}
	for _, f := range etcFiles {
		a = append(a, "--ro-bind-try", f, f)
	}
	a = append(a,
		"--ro-bind-data", "4", "/etc/passwd",
		"--ro-bind-data", "5", "/etc/group",
		"--proc", "/proc",
		"--dev", "/dev",
		"--size", strconv.Itoa(shmSize), "--tmpfs", "/dev/shm",
		"--size", strconv.FormatInt(o.MaxMemory, 10), "--tmpfs", "/tmp",
		"--bind", ws, ws,
		"--remount-ro", "/",
		"--remount-ro", "/dev",
		"--unshare-all",
		"--unshare-user",
		"--disable-userns",
		"--hostname", "reckon-sandbox",
		"--cap-drop", "ALL",
		"--die-with-parent",
		"--info-fd", strconv.Itoa(infoFD),
		"--new-session",
		"--chdir", ws,
		"--clearenv",
	)
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		a = append(a, "--setenv", k, v)
	}
	return a
}

// identityFiles returns the read ends of two pipes holding the sandbox's
// /etc/passwd and /etc/group: root, the sandbox user (uid, named
// "sandbox", home the workspace) and nobody. Tools that look their user up
// (id, whoami, python's getpass, ssh) find it; no host account is listed.
func identityFiles(uid, gid uint32, ws string) ([]*os.File, error) {
	passwd := "root:x:0:0:root:/root:/usr/sbin/nologin\n" +
		fmt.Sprintf("sandbox:x:%d:%d:reckon sandbox:%s:/bin/sh\n", uid, gid, ws)
	group := "root:x:0:\n" + fmt.Sprintf("sandbox:x:%d:\n", gid)
	if uid != 65534 {
		passwd += "nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n"
	}
	if gid != 65534 {
		group += "nogroup:x:65534:\n"
	}
	var out []*os.File
	for _, content := range []string{passwd, group} {
		r, w, err := os.Pipe()
		if err != nil {
			closeAll(out)
			return nil, err
		}
		// Far below a pipe's buffer: the write cannot block.
		_, err = io.WriteString(w, content)
		w.Close()
		if err != nil {
			r.Close()
			closeAll(out)
			return nil, err
		}
		out = append(out, r)
	}
	return out, nil
}

func closeAll(fs []*os.File) {
	for _, f := range fs {
		f.Close()
	}
}

// UnreachableError says the sandbox's user cannot traverse a directory
// above a workspace: bubblewrap, already running as that user, could not
// resolve the workspace's path.
type UnreachableError struct {
	// UID is the sandbox's user; Path the directory it must reach; Dir the
	// first directory above Path it may not search, with its mode and
	// owner.
	UID        uint32
	Path, Dir  string
	Mode       fs.FileMode
	Owner, Grp uint32
}

func (e *UnreachableError) Error() string {
	return fmt.Sprintf("the sandbox user %d cannot reach %s: %s (mode %04o, owner %d:%d) is not searchable by it; "+
		"put RECKON_DATA_DIR below directories every user may traverse (chmod o+x), or run the worker as an unprivileged user",
		e.UID, e.Path, e.Dir, e.Mode, e.Owner, e.Grp)
}

// reachable checks that uid/gid may traverse every directory above ws:
// bubblewrap, already running as that user, resolves the workspace path
// itself. The error (an *UnreachableError) names the first directory in
// the way.
func reachable(ws string, uid, gid uint32) error {
	for dir := filepath.Dir(ws); ; dir = filepath.Dir(dir) {
		fi, err := os.Stat(dir)
		if err != nil {
			return err
		}
		st, ok := fi.Sys().(*syscall.Stat_t)
		if !ok {
			return nil
		}
		m := fi.Mode().Perm()
		searchable := m&0o001 != 0 || st.Uid == uid && m&0o100 != 0 || st.Gid == gid && m&0o010 != 0
		if !searchable {
			return &UnreachableError{UID: uid, Path: ws, Dir: dir, Mode: m, Owner: st.Uid, Grp: st.Gid}
		}
		if dir == "/" || dir == "." {
			return nil
		}
	}
}

// Reachable reports whether the sandbox's user may reach dir (traverse
// dir and every directory above it). Only a worker running as root drops
// to another user (o.UID, o.GID; default 65534); otherwise the sandbox
// runs as the worker itself and the answer is nil. The worker asks at
// start-up about <RECKON_DATA_DIR>/workspaces, so that a data directory
// below a private one (a root home, mktemp -d) stops it with one line
// instead of failing every run_command.
func Reachable(o Config, dir string) error {
	if os.Geteuid() != 0 {
		return nil
	}
	uid, gid := cmp.Or(o.UID, DefaultUID), cmp.Or(o.GID, DefaultGID)
	abs, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	// reachable checks the directories above its argument: dir itself is
	// one of them for a path inside it.
	err = reachable(filepath.Join(abs, "workspace"), uid, gid)
	var ue *UnreachableError
	if errors.As(err, &ue) {
		ue.Path = abs
	}
	return err
}

// guardRoot lets only root and the sandbox's group (gid) pass root, the
// directory every workspace lies beneath, when ws is one of them and
// root belongs to root. While a command runs, a set-user-ID file it
// makes in its workspace belongs to the sandbox's user on the host, where
// the workspace is mounted without nosuid (its bits are stripped only
// after the command): a local user who could reach it would run as that
// user, the owner of every kernel workspace, and could rewrite any run's
// evidence. The sandbox's user still passes through its group; the
// command cannot undo this, root's directory is not its own.
func guardRoot(root, ws string, gid uint32) error {
	if root == "" {
		return nil
	}
	root, err := filepath.EvalSymlinks(root)
	if err != nil {
		return err
	}
	if !beneath(ws, root) {
		return nil
	}
	fi, err := os.Lstat(root)
	if err != nil {
		return err
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok || !fi.IsDir() || st.Uid != 0 {
		// Another user's data directory: whoever owns it decides.
		return nil
	}
	if st.Gid != gid {
		if err := os.Lchown(root, 0, int(gid)); err != nil {
			return err
		}
	}
	if fi.Mode().Perm() != 0o710 {
		return os.Chmod(root, 0o710)
	}
	return nil
}

// tidyWorkspace hands the workspace tree to the sandbox's user before a
// command: whatever wrote into it since the last command (an MCP server
// running as root, a person) may have left entries the unprivileged user
// could not change. The walk never follows a symlink, and os.Root keeps
// every operation beneath the workspace even if an entry is swapped for a
// link meanwhile. It also strips set-user/group-ID bits (stripSetID).
func tidyWorkspace(ws string, to *syscall.Credential) error {
	return walkWorkspace(ws, func(root *os.Root, name string, fi fs.FileInfo) error {
		st, ok := fi.Sys().(*syscall.Stat_t)
		if ok && (st.Uid != to.Uid || st.Gid != to.Gid) {
			if err := root.Lchown(name, int(to.Uid), int(to.Gid)); err != nil {
				return err
			}
		}
		return stripBits(root, name, fi)
	})
}

// stripSetID removes set-user-ID and set-group-ID bits from the files of
// the workspace: inside the sandbox they are harmless (no new privileges
// from the sandbox's own user), but on the host such a file would run as
// the sandbox's user for anyone who can reach it.
func stripSetID(ws string) error {
	return walkWorkspace(ws, stripBits)
}

func stripBits(root *os.Root, name string, fi fs.FileInfo) error {
	if fi.Mode().IsRegular() && fi.Mode()&(fs.ModeSetuid|fs.ModeSetgid) != 0 {
		return root.Chmod(name, fi.Mode().Perm())
	}
	return nil
}

// maxWalkDepth is how many directory levels beneath the workspace
// walkWorkspace descends. Each level holds one descriptor while the walk
// is below it, and a command can nest directories thousands deep in
// moments; workspaces of real projects stay far above this.
const maxWalkDepth = 256

// walkWorkspace calls f for the workspace itself (name ".") and every
// entry beneath it, each with the os.Root of its own directory and its
// name there. Resolving every entry from its own directory keeps a walk
// linear in the tree's size (a path from the workspace would cost its
// depth again for each entry: a command's 3000 nested directories held
// the worker for minutes). A directory at maxWalkDepth is not entered; it
// is closed to group and others instead (mode &^ 077), so that a
// set-user-ID file the walk did not reach runs for no other user.
func walkWorkspace(ws string, f func(root *os.Root, name string, fi fs.FileInfo) error) error {
	root, err := os.OpenRoot(ws)
	if err != nil {
		return err
	}
	defer root.Close()
	fi, err := root.Lstat(".")
	if err != nil {
		return err
	}
	err = f(root, ".", fi)
	// The walk goes on whatever f said of the workspace itself.
	return cmp.Or(err, walkDir(root, f, 1))
}

// walkDir calls f for every entry of dir, depth levels beneath the
// workspace, and walks its directories (see walkWorkspace). An entry that
// fails does not stop the walk, which returns the first error at its end
// (one is enough to report; a million failing entries must not hold a
// million errors). A worker that is not root walks as the command's own
// user, and a command can leave a directory it cannot read (mode 000):
// stopping there would leave a set-user-ID file elsewhere with its bit.
// What lies in such a directory no other user can reach either.
func walkDir(dir *os.Root, f func(root *os.Root, name string, fi fs.FileInfo) error, depth int) error {
	d, err := dir.Open(".")
	if err != nil {
		return err
	}
	names, first := d.Readdirnames(-1)
	d.Close()
	note := func(err error) {
		if first == nil {
			first = err
		}
	}
	for _, name := range names {
		fi, err := dir.Lstat(name)
		if errors.Is(err, fs.ErrNotExist) {
			continue // removed meanwhile
		}
		if err != nil {
			note(err)
			continue
		}
		note(f(dir, name, fi))
		if !fi.IsDir() {
			continue
		}
		if depth >= maxWalkDepth {
			// Only when open: a change of mode is a change the next
			// workspace manifest would show.
			if perm := fi.Mode().Perm(); perm&0o077 != 0 {
				if err := dir.Chmod(name, perm&^0o077); !errors.Is(err, fs.ErrNotExist) {
					note(err)
				}
			}
			continue
		}
		sub, err := dir.OpenRoot(name)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			note(err)
			continue
		}
		note(walkDir(sub, f, depth+1))
		sub.Close()
	}
	return first
}

// outputPipes carry a sandboxed command's stdout and stderr into the
// capped buffers. The worker creates them (rather than os/exec) so that
// they can belong to the sandbox's user: a command that reopens
// /dev/stdout or /dev/stderr (through /proc/self/fd) is checked against
// the pipe's owner.
type outputPipes struct {
	outR, outW, errR, errW *os.File
	wg                     sync.WaitGroup
	stdout, stderr         io.Writer
}

func newOutputPipes(owner *syscall.Credential, stdout, stderr io.Writer) (*outputPipes, error) {
	p := &outputPipes{stdout: stdout, stderr: stderr}
	var err error
	if p.outR, p.outW, err = os.Pipe(); err != nil {
		return nil, err
	}
	if p.errR, p.errW, err = os.Pipe(); err != nil {
		p.closeAll()
		return nil, err
	}
	if owner != nil {
		for _, w := range []*os.File{p.outW, p.errW} {
			if err := w.Chown(int(owner.Uid), int(owner.Gid)); err != nil {
				p.closeAll()
				return nil, err
			}
		}
	}
	return p, nil
}

// started closes the worker's copies of the write ends (the command holds
// its own) and starts copying.
func (p *outputPipes) started() {
	p.outW.Close()
	p.errW.Close()
	for _, c := range []struct {
		r *os.File
		w io.Writer
	}{{p.outR, p.stdout}, {p.errR, p.stderr}} {
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			_, _ = io.Copy(c.w, c.r)
		}()
	}
}

// wait waits for the copies to reach end of file, for at most grace after
// the command exited: a leaked descendant holding a pipe must not block the
// call (the sandbox's pid namespace normally takes every process down with
// the command).
func (p *outputPipes) wait(grace time.Duration) {
	done := make(chan struct{})
	go func() { p.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(grace):
		p.outR.Close()
		p.errR.Close()
		<-done
	}
}

func (p *outputPipes) closeAll() {
	for _, f := range []*os.File{p.outR, p.outW, p.errR, p.errW} {
		if f != nil {
			f.Close()
		}
	}
}
