// Package auth maps bearer tokens to named principals with a role, the
// event sources they may write and, optionally, the projects they may see.
// Secrets are kept only as SHA-256 digests and compared in constant time.
package auth

import (
	"bufio"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"unicode"

	"github.com/seed-7bc021c3/reckon/kernel"
)

// Roles. operator includes reader; agent may only ingest events.
const (
	RoleAgent    = "agent"
	RoleReader   = "reader"
	RoleOperator = "operator"
)

// Principal is an authenticated caller.
type Principal struct {
	Name string
	Role string
	// Sources are the source_ids the caller may write on POST /v1/events
	// besides its own name (the optional fourth field of a token entry).
	Sources []string
	// Projects, when not empty, are the only projects the caller may read
	// or write (the optional fifth field of a token entry); empty means
	// every project.
	Projects []string
}

// MaySee reports whether the principal may read or write project: always
// for a token without a project list.
func (p Principal) MaySee(project string) bool {
	return len(p.Projects) == 0 || slices.Contains(p.Projects, project)
}

// Limited reports whether the principal is limited to a list of projects.
func (p Principal) Limited() bool { return len(p.Projects) > 0 }

// MayWrite reports whether the principal may ingest events under source:
// its own name or a granted source, and never a reserved one (a token
// named "kernel" does not make its holder the kernel).
func (p Principal) MayWrite(source string) bool {
	if Reserved(source) {
		return false
	}
	if source == p.Name {
		return true
	}
	for _, s := range p.Sources {
		if s == source {
			return true
		}
	}
	return false
}

// Reserved reports whether source belongs to reckon itself and can never
// be written through the ingest API: kernel (the kernel's own events and
// every reconciliation), supervisor, and anything beginning with operator.
func Reserved(source string) bool {
	return source == "kernel" || source == "supervisor" || strings.HasPrefix(source, "operator")
}

// ReservedRule states Reserved for error messages.
const ReservedRule = `kernel, supervisor and sources beginning with "operator" are reckon's own and can never be granted`

// Allows reports whether the principal's role satisfies one of roles.
// operator satisfies reader.
func (p Principal) Allows(roles ...string) bool {
	for _, r := range roles {
		if p.Role == r || (r == RoleReader && p.Role == RoleOperator) {
			return true
		}
	}
	return false
}

type entry struct {
	digest [32]byte
	p      Principal
}

// AllowEmptyDirective, a line of its own in RECKON_TOKENS_FILE, says that
// the file names no token on purpose. Without it a reload that finds no
// token (a truncated file, one left with comments only) is refused like a
// parse error, so a mistake cannot lock every caller out.
const AllowEmptyDirective = "# reckon: no tokens"

// Tokens is the set of known tokens. Its zero value is empty and ready to
// use. The set is a slice behind an atomic pointer whose published elements
// are never changed (Add only appends past the published length), so
// Replace swaps a whole new set in while requests authenticate: each sees
// the old set or the new one, never a mix.
type Tokens struct {
	mu      sync.Mutex // serializes writers; readers never take it
	entries atomic.Pointer[[]entry]
	// emptyOnPurpose: the tokens file held AllowEmptyDirective.
	emptyOnPurpose bool
	// fromFile counts the tokens the tokens file named.
	fromFile int
}

// FromFile is how many of t's tokens the tokens file named.
func (t *Tokens) FromFile() int { return t.fromFile }

// EmptyOnPurpose reports whether the tokens file that t was loaded from
// says, with AllowEmptyDirective, that it names no token on purpose.
func (t *Tokens) EmptyOnPurpose() bool { return t.emptyOnPurpose }

// list is the current set; the caller must not modify it.
func (t *Tokens) list() []entry {
	if p := t.entries.Load(); p != nil {
		return *p
	}
	return nil
}

// Replace makes t's set the set of from, at once (from is not changed).
// A request authenticated after Replace returns sees only from's tokens.
func (t *Tokens) Replace(from *Tokens) {
	set := slices.Clip(from.list()) // t's next Add must not append into from's array
	t.mu.Lock()
	defer t.mu.Unlock()
	t.entries.Store(&set)
}

// Parse reads comma- or newline-separated
// name:role:secret[:source-a|source-b][:project-a|project-b] entries (the
// sources field may be empty when projects follow). Blank lines and lines
// starting with # are skipped.
func Parse(spec string) (*Tokens, error) {
	t := &Tokens{}
	return t, t.add(spec, "RECKON_TOKENS")
}

// Load reads tokens from the RECKON_TOKENS value and, when file is set, from
// the file (one entry a line).
func Load(spec, file string) (*Tokens, error) {
	t := &Tokens{}
	if err := t.add(spec, "RECKON_TOKENS"); err != nil {
		return nil, err
	}
	if file != "" {
		f, err := os.Open(file)
		if err != nil {
			return nil, fmt.Errorf("configuration: RECKON_TOKENS_FILE cannot be read: %v", err)
		}
		defer f.Close()
		before := t.Len()
		defer func() { t.fromFile = t.Len() - before }()
		sc := bufio.NewScanner(f)
		line := 0
		for sc.Scan() {
			line++
			text := sc.Text()
			if line == 1 {
				// Some editors begin a UTF-8 file with a byte order mark; it
				// would hide a first line's comment and join its name.
				text = strings.TrimPrefix(text, "\ufeff")
			}
			if strings.TrimSpace(text) == AllowEmptyDirective {
				t.emptyOnPurpose = true
			}
			if err := t.add(text, fmt.Sprintf("RECKON_TOKENS_FILE line %d", line)); err != nil {
				return nil, err
			}
		}
		if err := sc.Err(); err != nil {
			return nil, fmt.Errorf("configuration: RECKON_TOKENS_FILE: %v", err)
		}
	}
	return t, nil
}

func (t *Tokens) add(spec, where string) error {
	for _, line := range strings.Split(spec, "\n") {
		// A comment is the whole line: splitting it at commas first would
		// bring the entries after a comma in a commented-out (revoked)
		// line back to life.
		if strings.HasPrefix(strings.TrimSpace(line), "#") {
			continue
		}
		if err := t.addLine(line, where); err != nil {
			return err
		}
	}
	return nil
}

func (t *Tokens) addLine(line, where string) error {
	for _, item := range strings.Split(line, ",") {
		item = strings.TrimSpace(item)
		if item == "" || strings.HasPrefix(item, "#") {
			continue
		}
		parts := strings.Split(item, ":")
		if len(parts) < 3 || len(parts) > 5 || parts[0] == "" || parts[2] == "" {
			return fmt.Errorf("configuration: %s has an entry that is not name:role:secret[:source-a|source-b][:project-a|project-b] (the secret may not contain ':')", where)
		}
		name, role, secret := parts[0], parts[1], parts[2]
		// The name is the token's source and, for an operator, its actor
		// (operator:<name>): it is bounded like every id an event carries.
		if len(name) > maxNameLen {
			return fmt.Errorf("configuration: %s has an entry whose name is longer than %d bytes (it names the token's events)", where, maxNameLen)
		}
		// operator:ann and operator:a\u200bnn read the same and are two
		// actors: a record must name whom it seems to name.
		if invisible(name) {
			return fmt.Errorf("configuration: %s entry %+q has a control or format character (invisible, or reordering the text) in its name, which names the token's events and rulings", where, name)
		}
		switch role {
		case RoleAgent, RoleReader, RoleOperator:
		default:
			return fmt.Errorf("configuration: %s entry %q has unknown role %q (agent, reader or operator)", where, name, role)
		}
		if len(secret) < 8 {
			return fmt.Errorf("configuration: %s entry %q has a secret shorter than 8 characters", where, name)
		}
		sources, err := parseSources(parts, role, name, where)
		if err != nil {
			return err
		}
		projects, err := parseProjects(parts, name, where)
		if err != nil {
			return err
		}
		// One secret, one principal: with two, the role a bearer gets
		// would depend on the order of the entries.
		d := sha256.Sum256([]byte(secret))
		for _, e := range t.list() {
			if e.digest == d && (e.p.Name != name || e.p.Role != role || !slices.Equal(e.p.Sources, sources) || !slices.Equal(e.p.Projects, projects)) {
				return fmt.Errorf("configuration: %s entry %q uses the same secret as entry %q (role %s); give every token its own secret", where, name, e.p.Name, e.p.Role)
			}
		}
		t.add1(Principal{Name: name, Role: role, Sources: sources, Projects: projects}, secret)
	}
	return nil
}

// parseSources reads an entry's fourth field, the sources it may write
// besides its name (empty when absent or left empty before a fifth field).
func parseSources(parts []string, role, name, where string) ([]string, error) {
	if len(parts) < 4 || (len(parts) == 5 && strings.TrimSpace(parts[3]) == "") {
		return nil, nil
	}
	if role == RoleReader {
		return nil, fmt.Errorf("configuration: %s entry %q is a reader, which cannot ingest events; grant sources only to agent or operator tokens", where, name)
	}
	var sources []string
	for _, src := range strings.Split(parts[3], "|") {
		src = strings.TrimSpace(src)
		switch {
		case src == "":
			return nil, fmt.Errorf("configuration: %s entry %q has an empty source in its fourth field (source-a|source-b)", where, name)
		case Reserved(src):
			return nil, fmt.Errorf("configuration: %s entry %q grants source %q: %s", where, name, src, ReservedRule)
		case len(src) > 512 || strings.ContainsAny(src, " \t") || invisible(src):
			return nil, fmt.Errorf("configuration: %s entry %q grants source %q: a source is at most 512 bytes without spaces, control or format characters", where, name, src)
		}
		sources = append(sources, src)
	}
	return sources, nil
}

// parseProjects reads an entry's fifth field, the projects it is limited
// to (none: every project).
func parseProjects(parts []string, name, where string) ([]string, error) {
	if len(parts) < 5 {
		return nil, nil
	}
	var projects []string
	for _, p := range strings.Split(parts[4], "|") {
		p = strings.TrimSpace(p)
		switch {
		case p == "":
			return nil, fmt.Errorf("configuration: %s entry %q has an empty project in its fifth field (project-a|project-b)", where, name)
		case len(p) > kernel.MaxKeyLen || strings.ContainsAny(p, " \t") || invisible(p):
			return nil, fmt.Errorf("configuration: %s entry %q lists project %q: a project is at most %d bytes without spaces, control or format characters", where, name, p, kernel.MaxKeyLen)
		}
		if !slices.Contains(projects, p) {
			projects = append(projects, p)
		}
	}
	return projects, nil
}

// invisible reports whether s holds a control or format character.
func invisible(s string) bool {
	return strings.ContainsFunc(s, func(r rune) bool { return unicode.IsControl(r) || unicode.Is(unicode.Cf, r) })
}

// maxNameLen bounds a token's name as kernel.MaxKeyLen bounds the ids of
// events (operator:<name> must fit as an actor).
const maxNameLen = kernel.MaxKeyLen - len(kernel.ActorOperatorPrefix)

// Add registers a token whose holder writes under its own name only.
func (t *Tokens) Add(name, role, secret string) { t.AddWithSources(name, role, secret) }

// AddWithSources registers a token that may also write the given sources.
// Reserved sources are never granted, whatever the caller passes.
func (t *Tokens) AddWithSources(name, role, secret string, sources ...string) {
	t.add1(Principal{Name: name, Role: role, Sources: sources}, secret)
}

// add1 registers the principal p under secret. Reserved sources are never
// granted, whatever p says.
func (t *Tokens) add1(p Principal, secret string) {
	granted := p.Sources
	p.Sources = nil
	for _, s := range granted {
		if !Reserved(s) {
			p.Sources = append(p.Sources, s)
		}
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	// Readers hold at most the old length: the new element is written
	// where none of them reads, and published by the Store.
	next := append(t.list(), entry{digest: sha256.Sum256([]byte(secret)), p: p})
	t.entries.Store(&next)
}

// Sources lists every source a known token may write: each token's name
// and the sources its entry grants.
func (t *Tokens) Sources() []string {
	var out []string
	for _, e := range t.list() {
		out = append(out, e.p.Name)
		out = append(out, e.p.Sources...)
	}
	return out
}

// Len is the number of known tokens.
func (t *Tokens) Len() int { return len(t.list()) }

// Authenticate returns the principal of secret. Every entry is compared, in
// constant time, so timing reveals neither which token matched nor how much.
func (t *Tokens) Authenticate(secret string) (Principal, bool) {
	d := sha256.Sum256([]byte(secret))
	var found Principal
	ok := 0
	for _, e := range t.list() {
		if subtle.ConstantTimeCompare(d[:], e.digest[:]) == 1 {
			found = e.p
			ok = 1
		}
	}
	return found, ok == 1
}

// NewSecret returns a random 32-byte hex secret.
func NewSecret() string {
	var b [32]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
