package main

import (
	"bytes"
	"encoding/json"
	"io"

	"github.com/seed-7bc021c3/reckon/kernel"
)

// writeJSON writes v as JSON and a newline to w (each line after the
// first prefixed by prefix, indented by indent when it is not empty;
// "<", ">" and "&" as they are, for a reader), through
// kernel.TerminalJSON: the values hold ids,
// reasons and errors an agent or a model wrote, and a bidirectional
// override or a zero-width character in them, left raw by encoding/json,
// would reorder or hide what a terminal shows. Every JSON a command
// prints goes through here or writeRaw (TestJSONOutputsShareOneWriter).
func writeJSON(w io.Writer, v any, prefix, indent string) error {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if prefix != "" || indent != "" {
		enc.SetIndent(prefix, indent)
	}
	if err := enc.Encode(v); err != nil {
		return err
	}
	_, err := w.Write(kernel.TerminalJSON(buf.Bytes()))
	return err
}

// writeRaw writes raw, the API's JSON, indented and through
// kernel.TerminalJSON as writeJSON does; an answer that is not JSON is
// written as it came, its control and format characters escaped all the
// same.
func writeRaw(w io.Writer, raw []byte) error {
	var buf bytes.Buffer
	if err := json.Indent(&buf, bytes.TrimSpace(raw), "", "  "); err != nil {
		_, err = w.Write([]byte(kernel.Printable(string(raw))))
		return err
	}
	buf.WriteByte('\n')
	_, err := w.Write(kernel.TerminalJSON(buf.Bytes()))
	return err
}
