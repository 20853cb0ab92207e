//go:build benchscale

package benchscale

import (
	"context"
	"os"
	"testing"
)

// TestBenchScale is make bench-scale: the measurement at the size the
// environment gives (FromEnv), its table on stdout. Behind the benchscale
// build tag: it takes the better part of an hour at its default size and
// tens of gigabytes of disk, so neither make test nor the CI runs it.
func TestBenchScale(t *testing.T) {
	c, err := FromEnv(os.Getenv)
	if err != nil {
		t.Fatal(err)
	}
	res, err := Run(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	if err := res.Print(os.Stdout); err != nil {
		t.Fatal(err)
	}
}
