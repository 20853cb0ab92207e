package httpapi_test

import (
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/seed-7bc021c3/reckon/adapter/httpapi"
)

// apiDocReport compares the OpenAPI document with the routes a server
// actually serves.
type apiDocReport struct {
	// Undocumented lists served routes missing from the document, or
	// documented with other roles than they enforce.
	Undocumented []string
	// Unserved lists documented operations no route serves.
	Unserved []string
}

// checkOpenAPI checks doc (an OpenAPI 3.1 document whose operations list
// their roles in x-reckon-roles and whose public operations have an empty
// security) against routes. Route patterns use chi's {param} syntax, which
// is OpenAPI's path templating.
func checkOpenAPI(doc []byte, routes []httpapi.Route) (apiDocReport, error) {
	var d struct {
		OpenAPI string                                `json:"openapi"`
		Paths   map[string]map[string]json.RawMessage `json:"paths"`
	}
	if err := json.Unmarshal(doc, &d); err != nil {
		return apiDocReport{}, fmt.Errorf("openapi document: %w", err)
	}
	if !strings.HasPrefix(d.OpenAPI, "3.1") {
		return apiDocReport{}, fmt.Errorf("openapi document: version %q, want 3.1.x", d.OpenAPI)
	}
	type op struct {
		Security *[]map[string][]string `json:"security"`
		Roles    []string               `json:"x-reckon-roles"`
	}
	documented := map[string]op{}
	for path, methods := range d.Paths {
		for m, raw := range methods {
			switch m {
			case "get", "put", "post", "delete", "patch", "head", "options", "trace":
			default:
				continue // parameters, summary, ...
			}
			var o op
			if err := json.Unmarshal(raw, &o); err != nil {
				return apiDocReport{}, fmt.Errorf("openapi %s %s: %w", m, path, err)
			}
			documented[strings.ToUpper(m)+" "+path] = o
		}
	}
	var r apiDocReport
	served := map[string]bool{}
	for _, rt := range routes {
		k := rt.Method + " " + rt.Pattern
		served[k] = true
		o, ok := documented[k]
		if !ok {
			r.Undocumented = append(r.Undocumented, k)
			continue
		}
		public := o.Security != nil && len(*o.Security) == 0
		switch {
		case rt.Roles == nil && !public:
			r.Undocumented = append(r.Undocumented, k+": served without auth, documented as secured")
		case rt.Roles != nil && public:
			r.Undocumented = append(r.Undocumented, k+": needs a token, documented as public")
		case rt.Roles != nil && !sameSet(rt.Roles, o.Roles):
			r.Undocumented = append(r.Undocumented, fmt.Sprintf("%s: serves roles %v, documented x-reckon-roles %v", k, rt.Roles, o.Roles))
		}
	}
	for k := range documented {
		if !served[k] {
			r.Unserved = append(r.Unserved, k)
		}
	}
	sort.Strings(r.Undocumented)
	sort.Strings(r.Unserved)
	return r, nil
}

func sameSet(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}
