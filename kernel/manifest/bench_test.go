package manifest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"testing"
	"time"
)

// BenchmarkManifest measures one manifest of a workspace of 1,000 and
// 10,000 files (100 per directory, 64 bytes each, last changed an hour
// ago so metadata decides; one in a hundred just written, so hashed), as
// the worker takes it before and after each workspace tool call. It prints
// p50/p95 over 30 walks per size and the ratio of the two sizes' p50.
func BenchmarkManifest(b *testing.B) {
	var p50s []time.Duration
	sizes := []int{1000, 10000}
	for _, n := range sizes {
		dir := b.TempDir()
		old := time.Now().Add(-time.Hour)
		for i := 0; i < n; i++ {
			sub := filepath.Join(dir, fmt.Sprintf("d%03d", i/100))
			if i%100 == 0 {
				if err := os.MkdirAll(sub, 0o755); err != nil {
					b.Fatal(err)
				}
			}
			p := filepath.Join(sub, fmt.Sprintf("f%05d.txt", i))
			if err := os.WriteFile(p, make([]byte, 64), 0o644); err != nil {
				b.Fatal(err)
			}
			if i%100 != 0 {
				if err := os.Chtimes(p, old, old); err != nil {
					b.Fatal(err)
				}
			}
		}
		// Chtimes sets ctime to now: walk as if an hour later, with the
		// freshly written ones named for hashing.
		later := func() time.Time { return time.Now().Add(time.Hour) }
		hash := map[string]bool{}
		for i := 0; i < n; i += 100 {
			hash[fmt.Sprintf("d%03d/f%05d.txt", i/100, i)] = true
		}
		var lat []time.Duration
		for i := 0; i < 30; i++ {
			t0 := time.Now()
			m, err := Take(context.Background(), dir, Options{HashAlso: hash, Now: later})
			if err != nil || m.Truncated != "" || len(m.Entries) != n+n/100 {
				b.Fatalf("walk: %v %q %d entries", err, m.Truncated, len(m.Entries))
			}
			lat = append(lat, time.Since(t0))
		}
		sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
		p50, p95 := lat[len(lat)/2], lat[len(lat)*95/100]
		p50s = append(p50s, p50)
		fmt.Printf("manifest of %5d files: p50 %6.2f ms  p95 %6.2f ms  (%d hashed)\n", n, ms(p50), ms(p95), len(hash))
		b.ReportMetric(ms(p50), fmt.Sprintf("p50-ms@%d", n))
		b.ReportMetric(ms(p95), fmt.Sprintf("p95-ms@%d", n))
	}
	fmt.Printf("p50 ratio %d/%d files = %.1f (linear would be %.0f)\n", sizes[1], sizes[0], float64(p50s[1])/float64(p50s[0]), float64(sizes[1])/float64(sizes[0]))
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
