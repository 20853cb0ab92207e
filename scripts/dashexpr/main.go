// Command dashexpr prints the queries of a Grafana dashboard as a
// Prometheus rules file, one recording rule per query, so that `promtool
// check rules` parses each (make alerts). Grafana's variables are replaced
// by values of their kind first: $__rate_interval and $__interval by a
// duration, any other $name or ${name} by ".*" (they stand in regular
// expression matchers).
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"regexp"
)

// dashboard is what dashexpr reads of a dashboard: every panel's targets,
// and the rows' panels when a row is collapsed.
type dashboard struct {
	Panels []panel `json:"panels"`
}

type panel struct {
	ID      int      `json:"id"`
	Targets []target `json:"targets"`
	Panels  []panel  `json:"panels"`
}

type target struct {
	RefID string `json:"refId"`
	Expr  string `json:"expr"`
}

var (
	intervals = regexp.MustCompile(`\$(__rate_interval|__interval|__range)\b`)
	variables = regexp.MustCompile(`\$\{?[A-Za-z_][A-Za-z0-9_]*\}?`)
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: dashexpr DASHBOARD.json > rules.yml")
		os.Exit(2)
	}
	raw, err := os.ReadFile(os.Args[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, "dashexpr:", err)
		os.Exit(1)
	}
	var d dashboard
	if err := json.Unmarshal(raw, &d); err != nil {
		fmt.Fprintf(os.Stderr, "dashexpr: %s: %v\n", os.Args[1], err)
		os.Exit(1)
	}
	fmt.Println("groups:")
	fmt.Println("  - name: dashboard")
	fmt.Println("    rules:")
	n := 0
	var walk func([]panel)
	walk = func(ps []panel) {
		for _, p := range ps {
			for _, t := range p.Targets {
				if t.Expr == "" {
					continue
				}
				expr := variables.ReplaceAllString(intervals.ReplaceAllString(t.Expr, "5m"), ".*")
				q, _ := json.Marshal(expr) // a JSON string is a YAML string
				fmt.Printf("      - record: dashboard:panel_%d_%s\n        expr: %s\n", p.ID, t.RefID, q)
				n++
			}
			walk(p.Panels)
		}
	}
	walk(d.Panels)
	if n == 0 {
		fmt.Fprintf(os.Stderr, "dashexpr: %s holds no query\n", os.Args[1])
		os.Exit(1)
	}
}
