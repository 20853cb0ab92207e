// Package pglisten holds a PostgreSQL LISTEN session for good: the runs'
// resumer (reckon_await) and the triage requests of the MCP gateway's
// held calls (reckon_triage) both wait on one.
package pglisten

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/rs/zerolog"
)

// Listen passes each payload announced on channel to got until ctx ends,
// on a connection of its own (a listening session holds it for good).
// After a lost connection it logs lost (what covers the announcements
// meanwhile), waits (doubling from a second to a minute), calls relisten
// when set (announcements made meanwhile were not heard) and listens
// again.
func Listen(ctx context.Context, pool *pgxpool.Pool, channel, lost string, log zerolog.Logger, got func(payload string), relisten func()) {
	backoff := time.Second
	for ctx.Err() == nil {
		err := listenOnce(ctx, pool, channel, got)
		if ctx.Err() != nil {
			return
		}
		log.Warn().Err(err).Dur("retry_in", backoff).Msg(lost)
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, time.Minute)
		if relisten != nil {
			relisten()
		}
	}
}

// listenOnce holds one listening connection until it fails or ctx ends.
func listenOnce(ctx context.Context, pool *pgxpool.Pool, channel string, got func(string)) error {
	conn, err := pgx.ConnectConfig(ctx, pool.Config().ConnConfig.Copy())
	if err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{channel}.Sanitize()); err != nil {
		return fmt.Errorf("listen on %s: %w", channel, err)
	}
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return fmt.Errorf("wait for a notification on %s: %w", channel, err)
		}
		got(n.Payload)
	}
}
