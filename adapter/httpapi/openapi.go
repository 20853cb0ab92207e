package httpapi

import _ "embed"

// OpenAPI is the API description served at /openapi.json.
//
//go:embed openapi.json
var OpenAPI []byte
