package main

import (
	"context"
	"flag"
	"fmt"
	"os"

	"github.com/seed-7bc021c3/reckon/platform/buildinfo"
)

// runVersion prints the build's version and version control information
// (platform/buildinfo): one line, or one JSON object with --json.
func runVersion(_ context.Context, args []string) error {
	fs := flag.NewFlagSet("version", flag.ContinueOnError)
	asJSON := fs.Bool("json", false, "print the build information as one JSON object")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	in := buildinfo.Read()
	if *asJSON {
		return writeJSON(os.Stdout, in, "", "")
	}
	_, err := fmt.Fprintln(os.Stdout, in.String())
	return err
}
