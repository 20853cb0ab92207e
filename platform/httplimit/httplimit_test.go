package httplimit

import (
	"net"
	"net/http"
	"testing"
	"time"
)

// TestPerClient: a third connection from one address is closed on accept
// while two are open; closing one frees its slot.
func TestPerClient(t *testing.T) {
	t.Parallel()
	raw, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln := PerClient(raw, 2)
	defer ln.Close()
	accepted := make(chan net.Conn, 4)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted <- c
		}
	}()
	dial := func() net.Conn {
		t.Helper()
		c, err := net.Dial("tcp", raw.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	closedByServer := func(c net.Conn) bool {
		_ = c.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
		_, err := c.Read(make([]byte, 1))
		ne, timeout := err.(net.Error)
		return !(timeout && ne.Timeout())
	}
	dial()
	dial()
	first, second := <-accepted, <-accepted
	if third := dial(); !closedByServer(third) {
		t.Fatal("a third connection from the same address stayed open")
	}
	first.Close()
	_ = second
	fourth := dial()
	<-accepted
	if closedByServer(fourth) {
		t.Fatal("a connection after one closed was refused")
	}
}

// TestBearer: the scheme in any case, the token trimmed; anything else is
// no token.
func TestBearer(t *testing.T) {
	t.Parallel()
	for header, want := range map[string]string{"Bearer abc": "abc", "bearer abc": "abc", "BEARER  abc ": "abc", "Basic abc": "", "Bearer": "", "": ""} {
		r, _ := http.NewRequest("GET", "/", nil)
		r.Header.Set("Authorization", header)
		got, ok := Bearer(r)
		if got != want || ok != (want != "") {
			t.Errorf("Bearer(%q) = %q %v, want %q", header, got, ok, want)
		}
	}
}

// TestSlots: a key holds at most max slots; a released slot is taken
// again, and releasing twice gives back one.
func TestSlots(t *testing.T) {
	s := NewSlots(2)
	r1, ok1 := s.Acquire("a")
	_, ok2 := s.Acquire("a")
	_, ok3 := s.Acquire("a")
	_, okB := s.Acquire("b")
	if !ok1 || !ok2 || ok3 || !okB {
		t.Fatalf("acquire: %v %v %v %v", ok1, ok2, ok3, okB)
	}
	r1()
	r1()
	if _, ok := s.Acquire("a"); !ok {
		t.Fatal("a released slot was not taken again")
	}
	if _, ok := s.Acquire("a"); ok {
		t.Fatal("a double release gave back two slots")
	}
}
