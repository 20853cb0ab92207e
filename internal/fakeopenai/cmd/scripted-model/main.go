// Command scripted-model serves fakeopenai's scripted agent model in a
// process of its own, for tests in other languages (the TypeScript
// client's framework tests). It is not a language model: it answers what
// the test queued with POST /script. It prints its base URL (ending in
// /v1) as the first line of stdout and serves until killed.
package main

import (
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"

	"github.com/seed-7bc021c3/reckon/internal/fakeopenai"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:0", "listen address")
	flag.Parse()
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		fmt.Fprintf(os.Stderr, "scripted-model: listen %s: %v\n", *addr, err)
		os.Exit(1)
	}
	fmt.Printf("http://%s/v1\n", ln.Addr())
	fmt.Fprintln(os.Stderr, "scripted-model: a scripted OpenAI-compatible fake, not a language model; it answers what tests queue with POST /script")
	if err := http.Serve(ln, fakeopenai.NewAgentHandler()); err != nil {
		fmt.Fprintf(os.Stderr, "scripted-model: %v\n", err)
		os.Exit(1)
	}
}
