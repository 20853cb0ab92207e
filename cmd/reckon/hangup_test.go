package main

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/seed-7bc021c3/reckon/internal/pgtest"
	"github.com/seed-7bc021c3/reckon/internal/sandboxtest"
)

// A SIGHUP meant for the API's token reload (`pkill -HUP reckon`) does
// not end a worker: by default it would, in the middle of its calls. The
// worker logs that it has nothing to reload and keeps running; SIGTERM
// still stops it cleanly.
func TestWorkerSurvivesSIGHUP(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	conn := connectTemporal(ctx, t, "hangup-test")
	s := pgtest.New(t)
	var logs lockedBuffer
	cmd := exec.Command(os.Args[0], "worker")
	cmd.Env = reckonEnv(s.URL, conn, "hangup-test", "hangup-test", sandboxtest.Dir(t),
		"RECKON_LOG_LEVEL=info",
		"RECKON_TOKENS=",
	)
	cmd.Stderr = &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	defer func() {
		_ = cmd.Process.Kill()
		if t.Failed() {
			t.Logf("worker output:\n%s", logs.String())
		}
	}()
	waitLog := func(want string) {
		t.Helper()
		for !strings.Contains(logs.String(), want) {
			select {
			case err := <-exited:
				t.Fatalf("the worker exited (%v) before logging %q", err, want)
			case <-ctx.Done():
				t.Fatalf("no %q in the worker's log", want)
			case <-time.After(20 * time.Millisecond):
			}
		}
	}
	waitLog("executing runs from task queue")
	if err := cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	waitLog("nothing to reload")
	select {
	case err := <-exited:
		t.Fatalf("the worker exited after SIGHUP: %v", err)
	case <-time.After(500 * time.Millisecond):
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		if err != nil {
			t.Fatalf("after SIGTERM the worker exited with %v, want 0", err)
		}
	case <-ctx.Done():
		t.Fatal("the worker did not stop on SIGTERM")
	}
}
