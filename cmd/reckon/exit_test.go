package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"strings"
	"testing"
)

// TestExitCodes: help is 0 with the usage on stdout, a usage error 2, a
// failure 1; with --json the error is one JSON object.
func TestExitCodes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, c := range []struct {
		args       []string
		code       int
		stdoutHas  string
		stderrHas  string
		stdoutNone bool
	}{
		{args: []string{"--help"}, code: 0, stdoutHas: "usage: reckon <command>"},
		{args: []string{"-h"}, code: 0, stdoutHas: "usage: reckon <command>"},
		{args: []string{"help"}, code: 0, stdoutHas: "usage: reckon <command>"},
		{args: nil, code: 2, stderrHas: "usage: reckon <command>", stdoutNone: true},
		{args: []string{"nope"}, code: 2, stderrHas: `unknown command "nope"`, stdoutNone: true},
		{args: []string{"migrate", "--bogus"}, code: 2, stderrHas: "flag provided but not defined: -bogus", stdoutNone: true},
		{args: []string{"migrate", "stray"}, code: 2, stderrHas: `unexpected argument "stray"`, stdoutNone: true},
		{args: []string{"outbox"}, code: 2, stderrHas: "usage: reckon outbox parked|retrying", stdoutNone: true},
		// A flag's value out of its range is a usage error too, refused
		// before anything is read or connected (these exited 1).
		{args: []string{"outbox", "parked", "--limit", "-3"}, code: 2, stderrHas: "--limit must be positive", stdoutNone: true},
		{args: []string{"eval", "--supervisor", "bogus"}, code: 2, stderrHas: `--supervisor: "bogus"`, stdoutNone: true},
		{args: []string{"eval", "--settle", "bogus"}, code: 2, stderrHas: "--settle: must be evidence or inference", stdoutNone: true},
		{args: []string{"triage", "--run", "r1"}, code: 2, stderrHas: "--run needs --project", stdoutNone: true},
		{args: []string{"triage", "--concurrency", "0"}, code: 2, stderrHas: "--concurrency must be at least 1", stdoutNone: true},
		{args: []string{"drill", "--count", "0"}, code: 2, stderrHas: "--count: must be at least 1", stdoutNone: true},
		{args: []string{"soak", "--rounds", "0"}, code: 2, stderrHas: "--rounds must be at least 1", stdoutNone: true},
	} {
		var stdout, stderr bytes.Buffer
		code := run(ctx, c.args, &stdout, &stderr)
		if code != c.code || !strings.Contains(stdout.String(), c.stdoutHas) || !strings.Contains(stderr.String(), c.stderrHas) ||
			(c.stdoutNone && stdout.Len() > 0) {
			t.Errorf("reckon %q: exit %d (want %d), stdout %q, stderr %q", c.args, code, c.code, stdout.String(), stderr.String())
		}
	}
}

// TestOpsExitCodes: `reckon ops --help` is 0 on stdout, a missing flag
// 2, an unreachable API 1; with --json the error is JSON.
func TestOpsExitCodes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	env := deadAPIEnv(t)
	for _, c := range []struct {
		args      []string
		code      int
		stdoutHas string
		json      bool
	}{
		{args: []string{"--help"}, code: 0, stdoutHas: "reconcile"},
		{args: []string{"help"}, code: 0, stdoutHas: "reconcile"},
		{args: []string{"list", "-h"}, code: 0, stdoutHas: "-project"},
		{args: []string{}, code: 2},
		{args: []string{"frobnicate"}, code: 2},
		{args: []string{"list"}, code: 2},
		{args: []string{"list", "--json"}, code: 2, json: true},
		{args: []string{"verdicts", "--project", "p", "--since", "yesterday"}, code: 2},
		{args: []string{"reconcile", "--project", "p", "--run", "r", "--op", "o", "--effect", "none", "--note", "n", "--evidence", "notjson"}, code: 2},
		{args: []string{"list", "--project", "p"}, code: 1},
		{args: []string{"list", "--project", "p", "--json"}, code: 1, json: true},
	} {
		var stdout, stderr bytes.Buffer
		code := report(&stderr, "ops", opsMain(ctx, c.args, &stdout, &stderr, env))
		if code != c.code || !strings.Contains(stdout.String(), c.stdoutHas) {
			t.Errorf("reckon ops %q: exit %d (want %d), stdout %q, stderr %q", c.args, code, c.code, stdout.String(), stderr.String())
		}
		if c.json {
			var m map[string]any
			if err := json.Unmarshal(stderr.Bytes(), &m); err != nil || m["error"] == "" {
				t.Errorf("reckon ops %q: error is not JSON: %q", c.args, stderr.String())
			}
		}
	}
}

// deadAPIEnv is a getenv whose RECKON_URL names a loopback port nothing
// listens on: a command that reaches the network fails with exit 1.
func deadAPIEnv(t *testing.T) func(string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := "http://" + ln.Addr().String()
	ln.Close()
	return func(k string) string {
		if k == "RECKON_URL" {
			return dead
		}
		return ""
	}
}
