// Package manifest records a run's workspace: a metadata walk (path, type,
// size, mode, owner, mtime, ctime, inode, symlink target) that hashes a
// file's content only where metadata cannot decide — a file changed so
// recently that a second change within the filesystem's timestamp
// granularity would leave its times as they were. Two manifests of the same
// workspace compare path by path (Compare), which is how the workspace-diff
// probe tells what a tool call changed.
//
// Why metadata decides. A process can set a file's mtime back (utimensat)
// but not its ctime: every change of content or metadata sets ctime to the
// kernel's current time, which no system call lets a process choose. A file
// whose ctime, inode and size are unchanged since the walk has therefore not
// been written since — unless the write fell within the same timestamp tick
// as the previous change, which only a file changed within Granularity of
// the walk can suffer; those are hashed.
//
// Bounds. A walk stops at Limits.MaxFiles entries, after Limits.Budget or
// at a directory nested deeper than maxDepth levels; the manifest then says
// Truncated and proves nothing.
package manifest

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"sort"
	"strings"
	"time"
	"unicode/utf8"

	"golang.org/x/sys/unix"

	"github.com/seed-7bc021c3/reckon/kernel"
	"github.com/seed-7bc021c3/reckon/platform/defaults"
)

// Granularity is how close to the walk a change must be for metadata not
// to decide: a file whose mtime or ctime is within Granularity of the walk
// is hashed. Linux stamps files from a coarse clock (a scheduler tick, at
// most 10 ms); 2 s also covers filesystems with coarse timestamps.
const Granularity = 2 * time.Second

// Defaults of Limits (RECKON_MANIFEST_MAX_FILES, RECKON_MANIFEST_BUDGET).
const (
	DefaultMaxFiles = 100_000
	DefaultBudget   = 10 * time.Second
)

// maxDepth is the most directory levels beneath the workspace a walk
// enters; a deeper directory truncates the manifest. The walk holds one
// descriptor per level, and a command can nest directories tens of
// thousands deep in moments: walked to the bottom, they would take the
// worker's whole descriptor limit (the probe's process too) from every
// connection and file it opens meanwhile. Workspaces of real projects stay
// far above this.
const maxDepth = 1024

// Entry types.
const (
	TypeFile    = "f"
	TypeDir     = "d"
	TypeSymlink = "l"
	TypeOther   = "o" // fifo, socket, device
)

// Entry is one path of the workspace.
type Entry struct {
	Path  string `json:"p"`
	Type  string `json:"t"`
	Size  int64  `json:"s,omitempty"`
	Mode  uint32 `json:"m"`
	UID   uint32 `json:"u"`
	GID   uint32 `json:"g"`
	Mtime int64  `json:"mt"` // ns since the epoch
	Ctime int64  `json:"ct"`
	Ino   uint64 `json:"i"`
	// Link is a symlink's target (never followed).
	Link string `json:"l,omitempty"`
	// SHA256 is the content hash of a regular file changed within
	// Granularity of the walk (or asked for by the caller).
	SHA256 string `json:"h,omitempty"`
}

// Manifest is one walk of a workspace.
type Manifest struct {
	TakenAt time.Time `json:"taken_at"`
	// Entries are sorted by path; the workspace directory itself is not
	// one (its times change with every entry, which the entries show).
	Entries []Entry `json:"entries"`
	// Truncated says why the walk is incomplete; "" when it is complete.
	Truncated string `json:"truncated,omitempty"`
}

// Limits bound one walk.
type Limits struct {
	// MaxFiles caps the entries; default DefaultMaxFiles.
	MaxFiles int
	// Budget caps the walk's time; default DefaultBudget.
	Budget time.Duration
}

func (l Limits) withDefaults() Limits {
	l.MaxFiles = defaults.Positive(l.MaxFiles, DefaultMaxFiles)
	l.Budget = defaults.Positive(l.Budget, DefaultBudget)
	return l
}

// Options tune one walk.
type Options struct {
	Limits Limits
	// HashAlso names paths to hash whatever their times say: the paths an
	// earlier manifest hashed, so the two can be compared on content.
	HashAlso map[string]bool
	// Now is the walk's clock; default time.Now.
	Now func() time.Time
}

// Take walks the workspace directory dir. It opens dir without following
// a symlink at its last component and never follows one inside. A walk
// that hits a cap returns a Truncated manifest and no error; err is for a
// workspace that cannot be opened at all.
func Take(ctx context.Context, dir string, o Options) (Manifest, error) {
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return Manifest{}, fmt.Errorf("open workspace %s: %w", dir, err)
	}
	f := os.NewFile(uintptr(fd), dir)
	defer f.Close()
	return TakeAt(ctx, f, o)
}

// TakeAt walks the directory open as dir (see Take).
func TakeAt(ctx context.Context, dir *os.File, o Options) (Manifest, error) {
	now := o.Now
	if now == nil {
		now = time.Now
	}
	w := &walker{ctx: ctx, o: o, lim: o.Limits.withDefaults(), start: now(), now: now}
	w.recent = w.start.Add(-Granularity).UnixNano()
	dup, err := unix.Dup(int(dir.Fd()))
	if err != nil {
		return Manifest{}, fmt.Errorf("workspace %s: %w", dir.Name(), err)
	}
	unix.CloseOnExec(dup)
	if err := w.walk(dup, ""); err != nil && !errors.Is(err, errStop) {
		w.truncated = err.Error()
	}
	sort.Slice(w.entries, func(i, j int) bool { return w.entries[i].Path < w.entries[j].Path })
	m := Manifest{TakenAt: w.start.UTC(), Entries: w.entries, Truncated: w.truncated}
	if m.Entries == nil {
		m.Entries = []Entry{}
	}
	return m, nil
}

var errStop = errors.New("walk stopped at a cap")

type walker struct {
	ctx       context.Context
	o         Options
	lim       Limits
	start     time.Time
	now       func() time.Time
	recent    int64
	entries   []Entry
	truncated string
}

// walk lists the directory open as fd (which it closes) at rel.
func (w *walker) walk(fd int, rel string) error {
	d := os.NewFile(uintptr(fd), rel)
	defer d.Close()
	// Read no more names than the cap leaves room for, plus one to tell a
	// full directory: a directory of millions of names then costs the cap,
	// not a read of the whole directory before the first check.
	names, err := d.Readdirnames(w.lim.MaxFiles - len(w.entries) + 1)
	if err != nil && !errors.Is(err, io.EOF) {
		return fmt.Errorf("list %q: %w", rel, err)
	}
	sort.Strings(names)
	for _, name := range names {
		if err := w.ctx.Err(); err != nil {
			return err
		}
		if len(w.entries) >= w.lim.MaxFiles {
			w.truncated = fmt.Sprintf("more than %d entries (RECKON_MANIFEST_MAX_FILES)", w.lim.MaxFiles)
			return errStop
		}
		if err := w.overBudget(); err != nil {
			return err
		}
		p := path.Join(rel, name)
		if !utf8.ValidString(name) {
			// A stored manifest is JSON, which would turn the name's
			// invalid bytes into U+FFFD: two names could then share a
			// path, and the stored manifest would never match a walk.
			w.truncated = fmt.Sprintf("the name %q is not valid UTF-8, which a stored manifest cannot hold exactly", p)
			return errStop
		}
		var st unix.Stat_t
		if err := unix.Fstatat(fd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			if errors.Is(err, unix.ENOENT) {
				continue // removed meanwhile: absent from this walk
			}
			return fmt.Errorf("stat %q: %w", p, err)
		}
		e := Entry{Path: p, Mode: st.Mode &^ unix.S_IFMT, UID: st.Uid, GID: st.Gid,
			Mtime: st.Mtim.Nano(), Ctime: st.Ctim.Nano(), Ino: st.Ino}
		switch st.Mode & unix.S_IFMT {
		case unix.S_IFREG:
			e.Type, e.Size = TypeFile, st.Size
			if e.Mtime >= w.recent || e.Ctime >= w.recent || w.o.HashAlso[p] {
				if e.SHA256, err = w.hash(fd, name); err != nil {
					return fmt.Errorf("hash %q: %w", p, err)
				}
			}
		case unix.S_IFDIR:
			e.Type = TypeDir
		case unix.S_IFLNK:
			e.Type, e.Size = TypeSymlink, st.Size
			buf := make([]byte, 4096)
			n, err := unix.Readlinkat(fd, name, buf)
			if err != nil {
				return fmt.Errorf("readlink %q: %w", p, err)
			}
			e.Link = string(buf[:n])
			if !utf8.ValidString(e.Link) {
				w.truncated = fmt.Sprintf("the target of symlink %q is not valid UTF-8, which a stored manifest cannot hold exactly", p)
				return errStop
			}
		default:
			e.Type, e.Size = TypeOther, st.Size
		}
		w.entries = append(w.entries, e)
		if e.Type == TypeDir {
			if strings.Count(p, "/")+1 > maxDepth {
				w.truncated = fmt.Sprintf("directories nested deeper than %d levels", maxDepth)
				return errStop
			}
			sub, err := unix.Openat(fd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
			if err != nil {
				return fmt.Errorf("open %q: %w", p, err)
			}
			if err := w.walk(sub, p); err != nil {
				return err
			}
		}
	}
	return nil
}

// overBudget stops the walk once it took longer than Limits.Budget.
func (w *walker) overBudget() error {
	if w.now().Sub(w.start) > w.lim.Budget {
		w.truncated = fmt.Sprintf("the walk took longer than %s (RECKON_MANIFEST_BUDGET)", w.lim.Budget)
		return errStop
	}
	return nil
}

// hash reads the regular file name beneath fd without following a symlink
// (O_NONBLOCK: a FIFO swapped in cannot block the walk).
func (w *walker) hash(fd int, name string) (string, error) {
	hfd, err := unix.Openat(fd, name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return "", err
	}
	f := os.NewFile(uintptr(hfd), name)
	defer f.Close()
	h := sha256.New()
	// The budget bounds the read too (the error wraps errStop): a recently
	// written file can be huge, and a sparse one costs its writer nothing.
	if _, err := io.Copy(h, boundedReader{w, f}); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

type boundedReader struct {
	w *walker
	r io.Reader
}

func (b boundedReader) Read(p []byte) (int, error) {
	if err := b.w.ctx.Err(); err != nil {
		return 0, err
	}
	if err := b.w.overBudget(); err != nil {
		return 0, err
	}
	return b.r.Read(p)
}

// Digest is the SHA-256 of the manifest's entries (and truncation): equal
// digests mean equal manifests. TakenAt is not part of it.
func (m Manifest) Digest() string {
	h := sha256.New()
	_ = json.NewEncoder(h).Encode(struct {
		E []Entry `json:"e"`
		T string  `json:"t,omitempty"`
	}{m.Entries, m.Truncated})
	return hex.EncodeToString(h.Sum(nil))
}

// Summary is what tool.started / tool.completed carry of the manifest.
func (m Manifest) Summary() kernel.WorkspaceManifest {
	s := kernel.WorkspaceManifest{Digest: m.Digest(), Truncated: m.Truncated}
	for _, e := range m.Entries {
		switch e.Type {
		case TypeFile:
			s.Files++
			s.Bytes += e.Size
		case TypeDir:
			s.Dirs++
		default:
			s.Other++
		}
		if e.SHA256 != "" {
			s.Hashed++
		}
	}
	return s
}

// Hashed returns the paths whose content the manifest hashed (for
// Options.HashAlso of a later walk).
func (m Manifest) Hashed() map[string]bool {
	out := map[string]bool{}
	for _, e := range m.Entries {
		if e.SHA256 != "" {
			out[e.Path] = true
		}
	}
	return out
}

// Change kinds.
const (
	Created  = "created"
	Removed  = "removed"
	Modified = "modified"
)

// Change is one path that differs between two manifests.
type Change struct {
	Path string `json:"path"`
	Kind string `json:"kind"`
	// What lists the fields that differ for Modified (type, size, mode,
	// owner, mtime, ctime, inode, link, content).
	What []string `json:"what,omitempty"`
}

// Diff is the outcome of Compare.
type Diff struct {
	Changes []Change `json:"changes,omitempty"`
	// Undecided lists paths whose metadata is equal but whose content only
	// one side hashed: nothing can be said about them.
	Undecided []string `json:"undecided,omitempty"`
}

// Equal reports whether the manifests are proven equal: no change and
// nothing undecided.
func (d Diff) Equal() bool { return len(d.Changes) == 0 && len(d.Undecided) == 0 }

// Paths returns the changed paths.
func (d Diff) Paths() []string {
	out := make([]string, len(d.Changes))
	for i, c := range d.Changes {
		out[i] = c.Path
	}
	return out
}

// Compare lists the paths that differ from before to after. Both must be
// complete (not Truncated); the caller checks.
func Compare(before, after Manifest) Diff {
	var d Diff
	i, j := 0, 0
	for i < len(before.Entries) || j < len(after.Entries) {
		switch {
		case j == len(after.Entries) || i < len(before.Entries) && before.Entries[i].Path < after.Entries[j].Path:
			d.Changes = append(d.Changes, Change{Path: before.Entries[i].Path, Kind: Removed})
			i++
		case i == len(before.Entries) || after.Entries[j].Path < before.Entries[i].Path:
			d.Changes = append(d.Changes, Change{Path: after.Entries[j].Path, Kind: Created})
			j++
		default:
			b, a := before.Entries[i], after.Entries[j]
			if what := differ(b, a); len(what) > 0 {
				d.Changes = append(d.Changes, Change{Path: b.Path, Kind: Modified, What: what})
			} else if (b.SHA256 == "") != (a.SHA256 == "") {
				d.Undecided = append(d.Undecided, b.Path)
			}
			i++
			j++
		}
	}
	return d
}

func differ(b, a Entry) []string {
	var what []string
	add := func(cond bool, name string) {
		if cond {
			what = append(what, name)
		}
	}
	add(b.Type != a.Type, "type")
	add(b.Size != a.Size, "size")
	add(b.Mode != a.Mode, "mode")
	add(b.UID != a.UID || b.GID != a.GID, "owner")
	add(b.Mtime != a.Mtime, "mtime")
	add(b.Ctime != a.Ctime, "ctime")
	add(b.Ino != a.Ino, "inode")
	add(b.Link != a.Link, "link")
	add(b.SHA256 != "" && a.SHA256 != "" && b.SHA256 != a.SHA256, "content")
	return what
}
