package httpapi

import (
	_ "embed"
	"encoding/json"
	"strings"
	"sync"
)

// OpenAPI is the API description served at /openapi.json.
//
//go:embed openapi.json
var OpenAPI []byte

// documentedParams maps "METHOD pattern" to the names of the query
// parameters openapi.json documents for the route: the one list a route's
// query is checked against (checkQuery), so the document and the server
// cannot disagree on what a route takes.
var documentedParams = sync.OnceValue(func() map[string]map[string]bool {
	var doc struct {
		Paths map[string]map[string]struct {
			Parameters []struct {
				Name string `json:"name"`
				In   string `json:"in"`
			} `json:"parameters"`
		} `json:"paths"`
	}
	if err := json.Unmarshal(OpenAPI, &doc); err != nil {
		panic("httpapi: openapi.json does not parse: " + err.Error())
	}
	out := map[string]map[string]bool{}
	for path, ops := range doc.Paths {
		for method, op := range ops {
			names := map[string]bool{}
			for _, p := range op.Parameters {
				if p.In == "query" {
					names[p.Name] = true
				}
			}
			out[strings.ToUpper(method)+" "+path] = names
		}
	}
	return out
})

// queryParams is the set of query parameters the route takes.
func queryParams(method, pattern string) map[string]bool {
	return documentedParams()[method+" "+pattern]
}
