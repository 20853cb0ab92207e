package migrations

import "io/fs"

// Source is the migrations as Apply hands them to goose, for tests that
// drive goose themselves.
func Source() (fs.FS, error) { return expand(files) }
