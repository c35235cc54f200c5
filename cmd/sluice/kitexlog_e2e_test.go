package main

import (
	"net"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/cmd/sluice/internal/proctest"
)

// TestClientAgainstDownJobManagerPrintsOneLine checks that a client
// command whose JobManager is not there prints its own error and nothing
// else: none of the retry notes Kitex writes for each connection attempt.
func TestClientAgainstDownJobManagerPrintsOneLine(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there now
	for _, args := range [][]string{
		{"list", "--jm", addr},
		{"status", "--jm", addr, "0123456789abcdef"},
		{"overview", "--jm", addr},
	} {
		r := proctest.Sluice(t, nil, args...)
		lines := strings.Split(strings.TrimRight(r.Stderr, "\n"), "\n")
		// The TLS hint may follow: a refused dial and a TLS server's
		// hang-up read alike through Kitex.
		if len(lines) == 2 && strings.Contains(lines[1], "--tls-ca") {
			lines = lines[:1]
		}
		if r.Code == 0 || len(lines) != 1 || !strings.HasPrefix(lines[0], "sluice: ") {
			t.Errorf("sluice %v: exit %d, stderr:\n%s\nwant exactly one line, the command's error (and the TLS hint)", args, r.Code, r.Stderr)
		}
	}
}
