package buildinfo

import (
	"runtime/debug"
	"strings"
	"testing"
)

// TestFromReadsVCSSettings: the revision, commit time and modified flag
// come from the settings the go command stamps, and String prints them on
// one line; a build without them says so rather than printing nothing.
func TestFromReadsVCSSettings(t *testing.T) {
	t.Parallel()
	bi := &debug.BuildInfo{GoVersion: "go1.27.3", Main: debug.Module{Path: "github.com/seed-7bc021c3/reckon", Version: "v1.2.3"},
		Settings: []debug.BuildSetting{
			{Key: "GOOS", Value: "linux"}, {Key: "GOARCH", Value: "arm64"},
			{Key: "vcs.revision", Value: "0123456789abcdef0123456789abcdef01234567"},
			{Key: "vcs.time", Value: "2026-08-28T16:20:06Z"}, {Key: "vcs.modified", Value: "true"},
		}}
	in := From(bi)
	want := Info{Version: "v1.2.3", Revision: "0123456789abcdef0123456789abcdef01234567", Time: "2026-08-28T16:20:06Z",
		Modified: true, Go: "go1.27.3", Platform: "linux/arm64"}
	if in != want {
		t.Fatalf("From = %+v, want %+v", in, want)
	}
	if got := in.String(); got != "reckon v1.2.3 revision 0123456789abcdef0123456789abcdef01234567 (2026-08-28T16:20:06Z, modified) go1.27.3 linux/arm64" {
		t.Fatalf("String = %q", got)
	}
	bare := From(&debug.BuildInfo{GoVersion: "go1.27.3"})
	if bare.Version != "(devel)" || bare.Revision != "" || !strings.Contains(bare.String(), "revision unknown") {
		t.Fatalf("a build without VCS settings: %+v %q", bare, bare.String())
	}
}
