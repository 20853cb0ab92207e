package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"syscall"

	"github.com/mattn/go-isatty"
	"github.com/rs/zerolog"

	"github.com/seed-7bc021c3/reckon/internal/app"
	"github.com/seed-7bc021c3/reckon/platform/config"
)

func runDev(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("dev", flag.ContinueOnError)
	noWorker := fs.Bool("no-worker", false, "run no run worker in this process: runs wait for a separate `reckon worker` (TEMPORAL_ADDRESS = the embedded server printed at start)")
	s, err := prologue(fs, args)
	if err != nil {
		return err
	}
	cfg := s.cfg
	stack, err := app.StartDev(ctx, cfg, app.DevConfig{Kernel: app.KernelConfig{NoWorker: *noWorker}})
	if err != nil {
		return err
	}
	defer stack.Close()
	if cfg.TokensFile != "" {
		// Only with a file to re-read: dev often runs in a terminal, whose
		// hangup (SIGHUP) should still end it.
		stack.Core.ReloadTokensOn(ctx, syscall.SIGHUP)
	}
	if stack.GeneratedToken != "" {
		if err := showDevToken(stack.Core.Log, os.Stderr, cfg.DataDir, stack.GeneratedToken); err != nil {
			return err
		}
	}
	if err := stack.StartPipeline(stack.Operations); err != nil {
		return err
	}
	// Start-up lines go through the logger (with no level: shown at any
	// RECKON_LOG_LEVEL), so in JSON mode every line of the stream is JSON.
	log := stack.Core.Log
	log.Log().Str("api_addr", stack.APIAddr).Msgf("reckon dev: API on %s", stack.APIURL())
	if e := stack.Kernel.Conn.Embedded; e != nil {
		more := "more workers"
		if *noWorker {
			more = "no run worker here (--no-worker); runs wait for one"
		}
		log.Log().Str("temporal_address", e.HostPort()).Msgf("reckon dev: embedded Temporal on %s (namespace %s, task queue %s); %s: TEMPORAL_ADDRESS=%s reckon worker",
			e.HostPort(), cfg.TemporalNamespace, cfg.TaskQueue, more, e.HostPort())
	} else if *noWorker {
		log.Log().Msgf("reckon dev: no run worker here (--no-worker); runs wait for `reckon worker` on task queue %s at %s", cfg.TaskQueue, cfg.TemporalAddress)
	}
	<-ctx.Done()
	return nil
}

// devTokenFile is where `reckon dev` writes its generated operator token
// when its standard error is not a terminal, beneath RECKON_DATA_DIR.
const devTokenFile = "dev-token"

// showDevToken hands dev's generated operator token to the person who
// started it, never to the log stream (a secret in every log collector
// that reads it): on standard error when that is a terminal, otherwise in
// <RECKON_DATA_DIR>/dev-token, mode 0600, whose path one log line names.
// TestDevTokenNeverInTheLog.
func showDevToken(log zerolog.Logger, stderr *os.File, dataDir, token string) error {
	if isatty.IsTerminal(stderr.Fd()) {
		fmt.Fprintf(stderr, "reckon dev: no RECKON_TOKENS set; generated operator token (shown once, on this terminal only):\n  %s\n", token)
		return nil
	}
	path := filepath.Join(dataDir, devTokenFile)
	if err := writeSecretFile(path, token+"\n"); err != nil {
		return &config.Error{Var: "RECKON_DATA_DIR", Problem: fmt.Sprintf("(%s): cannot write the generated operator token to %s: %v (or set RECKON_TOKENS)", dataDir, path, err)}
	}
	log.Log().Str("token_file", path).Msgf("reckon dev: no RECKON_TOKENS set; generated operator token written to %s (mode 0600; printed nowhere)", path)
	return nil
}

// writeSecretFile replaces path with content, readable by its owner only
// from the moment it exists: written to a private temporary file in the
// same directory, then renamed over path.
func writeSecretFile(path, content string) error {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+"-*")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name()) // a no-op once renamed
	// CreateTemp made it 0600.
	if _, err := f.WriteString(content); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(f.Name(), path)
}
