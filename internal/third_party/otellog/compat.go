// Copyright The OpenTelemetry Authors
// SPDX-License-Identifier: Apache-2.0

package log // import "go.opentelemetry.io/otel/log"

// reckon compatibility shim: go.temporal.io/server v1.32.2 was written
// against go.opentelemetry.io/otel/log v0.20, whose attribute helpers moved
// to go.opentelemetry.io/otel/attribute in v1.47. The rest of the module
// must stay at v1.47 because go.opentelemetry.io/otel v1.47 imports it.
// These aliases keep both importers compiling; see README.reckon.md.

import "go.opentelemetry.io/otel/attribute"

// KeyValue is a key-value pair of a log record attribute.
type KeyValue = attribute.KeyValue

// String returns a KeyValue for a string value.
func String(key, value string) KeyValue { return attribute.String(key, value) }

// Int64 returns a KeyValue for an int64 value.
func Int64(key string, value int64) KeyValue { return attribute.Int64(key, value) }

// Int returns a KeyValue for an int value.
func Int(key string, value int) KeyValue { return attribute.Int(key, value) }

// Bool returns a KeyValue for a bool value.
func Bool(key string, value bool) KeyValue { return attribute.Bool(key, value) }
