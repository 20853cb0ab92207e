package httpapi

// SetStatusObserver makes every server of the test binary report each
// routed response's route ("GET /v1/runs/{run_id}") and status to f.
func SetStatusObserver(f func(route string, status int)) { statusObserver.Store(&f) }
