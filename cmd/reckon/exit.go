package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
)

// Exit codes, as command-line conventions have them: help is success,
// a mistake in how the command was called is 2, a failure while doing the
// work is 1.
const (
	exitOK      = 0
	exitFailure = 1
	exitUsage   = 2
)

// usageError is a mistake in the command line (an unknown flag, a missing
// required flag, a stray argument): exit 2.
type usageError struct{ err error }

func (e *usageError) Error() string { return e.err.Error() }
func (e *usageError) Unwrap() error { return e.err }

// usageErrorf makes a usageError.
func usageErrorf(format string, args ...any) error {
	return &usageError{err: fmt.Errorf(format, args...)}
}

// jsonError marks the error of a command run with --json: it is reported
// as one JSON object, {"error": ..., "status"?: <API status>}, so a script
// reading JSON gets JSON either way.
type jsonError struct{ err error }

func (e *jsonError) Error() string { return e.err.Error() }
func (e *jsonError) Unwrap() error { return e.err }

// asJSON wraps err as a jsonError when on.
func asJSON(err error, on bool) error {
	if err == nil || !on {
		return err
	}
	return &jsonError{err: err}
}

// parseFlags parses args into fs and refuses positional arguments. -h and
// --help print the flags to standard output (or fs's output when set) and
// return flag.ErrHelp (exit 0); any other parse error is a usageError.
func parseFlags(fs *flag.FlagSet, args []string) error {
	out := fs.Output()
	if out == os.Stderr {
		out = os.Stdout
	}
	fs.SetOutput(io.Discard)
	err := fs.Parse(args)
	fs.SetOutput(out)
	switch {
	case errors.Is(err, flag.ErrHelp):
		fmt.Fprintf(out, "usage: reckon %s [flags]\n\nflags:\n", fs.Name())
		fs.PrintDefaults()
		return flag.ErrHelp
	case err != nil:
		return usageErrorf("%v (see reckon %s --help)", err, fs.Name())
	case fs.NArg() > 0:
		return usageErrorf("unexpected argument %q (flags only; see reckon %s --help)", fs.Arg(0), fs.Name())
	}
	return nil
}

// report prints err for command name to stderr and returns the exit code.
func report(stderr io.Writer, name string, err error) int {
	if err == nil || errors.Is(err, flag.ErrHelp) {
		return exitOK
	}
	code := exitFailure
	var ue *usageError
	if errors.As(err, &ue) {
		code = exitUsage
	}
	var je *jsonError
	if errors.As(err, &je) {
		out := map[string]any{"error": err.Error(), "command": name}
		var ae *apiError
		if errors.As(err, &ae) {
			out["error"], out["status"] = ae.Message, ae.Status
		}
		if code == exitUsage {
			out["usage"] = true
		}
		_ = writeJSON(stderr, out, "", "")
		return code
	}
	fmt.Fprintf(stderr, "reckon %s: %v\n", name, err)
	return code
}
