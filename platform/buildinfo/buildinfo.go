// Package buildinfo says which build of reckon is running, from what the
// Go toolchain stamped into the binary (runtime/debug.ReadBuildInfo): the
// module's version, and the version control revision, commit time and
// whether the tree had uncommitted changes. `reckon version` prints it;
// serving processes log it at start-up.
package buildinfo

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"
)

// Info is what one build knows about itself. A field the build did not
// stamp is empty: a binary built outside a checkout (a source tarball),
// or with -buildvcs=false, has no revision.
type Info struct {
	// Version is the main module's version: a release tag when built with
	// `go install module@version`, "(devel)" when built from a checkout.
	Version string `json:"version"`
	// Revision is the commit the binary was built from (vcs.revision).
	Revision string `json:"revision,omitempty"`
	// Time is the commit's time, RFC 3339 (vcs.time).
	Time string `json:"time,omitempty"`
	// Modified says the working tree had uncommitted changes (vcs.modified).
	Modified bool `json:"modified"`
	// Go is the toolchain that built the binary; Platform its GOOS/GOARCH.
	Go       string `json:"go"`
	Platform string `json:"platform"`
}

// Read returns the running binary's build information.
func Read() Info {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return Info{Version: "unknown", Go: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH}
	}
	return From(bi)
}

// From extracts Info from a binary's build information.
func From(bi *debug.BuildInfo) Info {
	in := Info{Version: bi.Main.Version, Go: bi.GoVersion}
	if in.Version == "" {
		in.Version = "(devel)"
	}
	goos, goarch := runtime.GOOS, runtime.GOARCH
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			in.Revision = s.Value
		case "vcs.time":
			in.Time = s.Value
		case "vcs.modified":
			in.Modified = s.Value == "true"
		case "GOOS":
			goos = s.Value
		case "GOARCH":
			goarch = s.Value
		}
	}
	in.Platform = goos + "/" + goarch
	return in
}

// String is the one line `reckon version` prints, e.g.
// "reckon (devel) revision 623aa17… (2026-08-28T16:20:06Z, modified) go1.27.3 linux/amd64".
func (in Info) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "reckon %s", in.Version)
	switch {
	case in.Revision == "":
		b.WriteString(" revision unknown (built without version control information)")
	default:
		fmt.Fprintf(&b, " revision %s", in.Revision)
		var notes []string
		if in.Time != "" {
			notes = append(notes, in.Time)
		}
		if in.Modified {
			notes = append(notes, "modified")
		}
		if len(notes) > 0 {
			fmt.Fprintf(&b, " (%s)", strings.Join(notes, ", "))
		}
	}
	fmt.Fprintf(&b, " %s %s", in.Go, in.Platform)
	return b.String()
}
