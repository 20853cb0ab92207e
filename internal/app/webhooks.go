package app

import (
	"github.com/seed-7bc021c3/reckon/kernel/webhook"
)

// NewDeliverer returns the process's webhook deliverer, its metrics on the
// registry, or nil when neither RECKON_WEBHOOKS nor RECKON_WEBHOOKS_FILE
// is set: the process then delivers none and leaves the registered
// endpoints as they are. The publisher role runs it (`reckon serve
// --publisher`, `reckon dev`): the role that drains the outbox, needs
// only PostgreSQL, and already scales by claiming with SKIP LOCKED
// (docs/production.md#webhooks).
func (c *Core) NewDeliverer() *webhook.Deliverer {
	if !c.Cfg.WebhooksSet {
		return nil
	}
	m := webhook.NewMetrics(c.Registry, c.Pool, webhook.EndpointIDs(c.Cfg.Webhooks))
	return webhook.New(c.Pool, webhook.Config{Endpoints: c.Cfg.Webhooks}, m, c.Log.With().Str("component", "webhooks").Logger())
}
