package auth_test

import (
	"strings"
	"testing"

	"github.com/seed-7bc021c3/reckon/adapter/auth"
)

// FuzzParseTokens: any token spec either parses or is refused with an
// error, never a panic; every token of a parsed spec authenticates with
// its secret as the name and role the spec gave.
func FuzzParseTokens(f *testing.F) {
	for _, s := range []string{
		"bot:agent:s3cret", "bot:agent:s3cret:src-a|src-b,ro:reader:r", "op:operator:x:kernel", "a:b", "", ",,",
		"bot:agent:s\x00cret", "bot:agent:\xff", "bot:admin:x", "bot:agent:x,bot:reader:y", "  bot : agent : x  ",
		"#,::", "# old:agent:s1, ops:operator:s2\nbot:agent:s3",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, spec string) {
		toks, err := auth.Parse(spec)
		if err != nil {
			return
		}
		// The entries as Parse reads them: a line whose text starts with
		// "#" is a comment whole, whatever commas it holds (a revoked
		// line stays revoked); the other lines' comma-separated items,
		// trimmed, except those starting with "#".
		var entries []string
		for _, line := range strings.Split(spec, "\n") {
			if !strings.HasPrefix(strings.TrimSpace(line), "#") {
				entries = append(entries, strings.Split(line, ",")...)
			}
		}
		for _, entry := range entries {
			entry = strings.TrimSpace(entry)
			parts := strings.Split(entry, ":")
			if entry == "" || strings.HasPrefix(entry, "#") || len(parts) < 3 {
				continue
			}
			secret := parts[2]
			p, ok := toks.Authenticate(secret)
			if !ok {
				t.Fatalf("spec %q: secret %q of a parsed entry does not authenticate", spec, secret)
			}
			if p.Name == "" || p.Role == "" {
				t.Fatalf("spec %q: principal %+v", spec, p)
			}
		}
	})
}
