package main

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sluicehq/sluice/cmd/sluice/internal/proctest"
	"github.com/sluicehq/sluice/internal/testutil"
)

// TestE2EAttachedRunStreamsRecords: `sluice run` attached to an unbounded
// job prints its collected records while it runs (as checkpoints complete),
// and an interrupt cancels the job: the command exits non-zero saying so,
// with every record it printed a different one.
func TestE2EAttachedRunStreamsRecords(t *testing.T) {
	const keys, perKey = 2, 400
	c := proctest.Start(t, nil, 2)
	cmd := exec.Command(proctest.Bin(t), "run", "-p", "2", "--checkpoint-interval", "100ms", "-C", "sandbox.clock=wall",
		moduleDir(t, "examples/exactlyonce"), "--", "--keys", fmt.Sprint(keys), "--per-key", fmt.Sprint(perKey),
		"--rate", "2000", "--records", "--unbounded")
	cmd.Env = append(os.Environ(), c.Env...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr := &testutil.SyncBuffer{}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	lines := make(chan string)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
		exited <- cmd.Wait()
	}()
	seen := map[string]bool{}
	timeout := time.After(3 * time.Minute)
	for len(seen) < keys*perKey {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("sluice run ended after %d records:\n%s", len(seen), stderr.String())
			}
			if seen[l] {
				t.Fatalf("record %q printed twice", l)
			}
			seen[l] = true
		case <-timeout:
			cmd.Process.Kill()
			t.Fatalf("%d of %d records printed in 3 minutes:\n%s", len(seen), keys*perKey, stderr.String())
		}
	}
	// Every record is out while the job still runs: it is unbounded.
	if jobs := c.Jobs(); len(jobs) != 1 || jobs[0].State != "RUNNING" {
		t.Fatalf("jobs after every record was printed: %+v", jobs)
	}
	for k := range keys {
		for s := 1; s <= perKey; s++ {
			if !seen[fmt.Sprintf("k%d\t%d", k, s)] {
				t.Fatalf("record k%d\t%d missing", k, s)
			}
		}
	}
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	for l := range lines {
		t.Errorf("printed after every record: %q", l)
	}
	var ee *exec.ExitError
	if err := <-exited; !errors.As(err, &ee) || ee.ExitCode() == 0 {
		t.Fatalf("sluice run after an interrupt: %v\n%s", err, stderr.String())
	}
	if s := stderr.String(); !strings.Contains(s, "interrupted: canceling job") || !strings.Contains(s, "CANCELED") ||
		!strings.Contains(s, fmt.Sprintf("after %d records", keys*perKey)) {
		t.Fatalf("stderr after an interrupt:\n%s", s)
	}
	if jobs := c.Jobs(); len(jobs) != 1 || jobs[0].State != "CANCELED" {
		t.Fatalf("jobs after the interrupt: %+v", jobs)
	}
}

// TestE2EAttachedRunSaysWhyNoRecordsCome: an attached run of an unbounded
// job without checkpoints prints no records while it runs (they are
// released as checkpoints complete), and after a while says so on stderr,
// once, naming --checkpoint-interval.
func TestE2EAttachedRunSaysWhyNoRecordsCome(t *testing.T) {
	c := proctest.Start(t, nil, 2)
	cmd := exec.Command(proctest.Bin(t), "run", "-p", "2", "-C", "sandbox.clock=wall",
		moduleDir(t, "examples/exactlyonce"), "--", "--keys", "2", "--per-key", "100000", "--rate", "200", "--records", "--unbounded")
	cmd.Env = append(os.Environ(), c.Env...)
	stdout, stderr := &testutil.SyncBuffer{}, &testutil.SyncBuffer{}
	cmd.Stdout, cmd.Stderr = stdout, stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	const hint = "has no checkpoints, so its collected records are released when it ends"
	deadline := time.Now().Add(2 * time.Minute)
	for !strings.Contains(stderr.String(), hint) {
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			t.Fatalf("no hint in 2 minutes:\n%s", stderr.String())
		}
		select {
		case err := <-exited:
			t.Fatalf("sluice run ended: %v\n%s", err, stderr.String())
		case <-time.After(200 * time.Millisecond):
		}
	}
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	<-exited
	if s := stderr.String(); strings.Count(s, hint) != 1 || !strings.Contains(s, "--checkpoint-interval") {
		t.Fatalf("stderr:\n%s", s)
	}
	if stdout.String() != "" {
		t.Fatalf("records printed by a job without checkpoints while it ran:\n%s", stdout.String())
	}
}
