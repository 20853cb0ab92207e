// Package auth maps bearer tokens to named principals with a role. Secrets
// are kept only as SHA-256 digests and compared in constant time.
package auth

import (
	"bufio"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"fmt"
	"os"
	"strings"
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
}

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

// Tokens is the set of known tokens.
type Tokens struct {
	entries []entry
}

// Parse reads comma- or newline-separated name:role:secret entries. Blank
// lines and lines starting with # are skipped.
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
		sc := bufio.NewScanner(f)
		line := 0
		for sc.Scan() {
			line++
			if err := t.add(sc.Text(), fmt.Sprintf("RECKON_TOKENS_FILE line %d", line)); err != nil {
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
	for _, item := range strings.FieldsFunc(spec, func(r rune) bool { return r == ',' || r == '\n' }) {
		item = strings.TrimSpace(item)
		if item == "" || strings.HasPrefix(item, "#") {
			continue
		}
		parts := strings.SplitN(item, ":", 3)
		if len(parts) != 3 || parts[0] == "" || parts[2] == "" {
			return fmt.Errorf("configuration: %s has an entry that is not name:role:secret", where)
		}
		switch parts[1] {
		case RoleAgent, RoleReader, RoleOperator:
		default:
			return fmt.Errorf("configuration: %s entry %q has unknown role %q (agent, reader or operator)", where, parts[0], parts[1])
		}
		if len(parts[2]) < 8 {
			return fmt.Errorf("configuration: %s entry %q has a secret shorter than 8 characters", where, parts[0])
		}
		t.Add(parts[0], parts[1], parts[2])
	}
	return nil
}

// Add registers a token.
func (t *Tokens) Add(name, role, secret string) {
	t.entries = append(t.entries, entry{digest: sha256.Sum256([]byte(secret)), p: Principal{Name: name, Role: role}})
}

// Len is the number of known tokens.
func (t *Tokens) Len() int { return len(t.entries) }

// Authenticate returns the principal of secret. Every entry is compared, in
// constant time, so timing reveals neither which token matched nor how much.
func (t *Tokens) Authenticate(secret string) (Principal, bool) {
	d := sha256.Sum256([]byte(secret))
	var found Principal
	ok := 0
	for _, e := range t.entries {
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
