package logring

import (
	"bytes"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/internal/control"
)

func add(r *Ring, n int, format string) {
	for i := range n {
		r.Add(control.LogLine{Message: fmt.Sprintf(format, i)})
	}
}

func TestRingKeepsAllWithinBounds(t *testing.T) {
	r := New(100, 1<<20)
	add(r, 40, "line %d")
	got := r.Read(0, 0, nil)
	if len(got) != 40 {
		t.Fatalf("read %d lines, want 40", len(got))
	}
	for i, l := range got {
		if l.Seq != uint64(i+1) || l.Message != fmt.Sprintf("line %d", i) || l.Dropped != 0 {
			t.Fatalf("line %d = %+v", i, l)
		}
	}
}

func TestRingDropsOldestByCountAndSaysHowMany(t *testing.T) {
	r := New(10, 1<<20)
	add(r, 25, "line %d")
	got := r.Read(0, 0, nil)
	if len(got) != 10 || got[0].Message != "line 15" || got[9].Message != "line 24" {
		t.Fatalf("kept %d lines, %q..%q; want line 15..line 24", len(got), got[0].Message, got[len(got)-1].Message)
	}
	if got[0].Dropped != 15 {
		t.Fatalf("first line says %d dropped, want 15", got[0].Dropped)
	}
	// A reader that had seen line 19 (Seq 20) misses nothing.
	if got := r.Read(20, 0, nil); len(got) != 5 || got[0].Dropped != 0 || got[0].Seq != 21 {
		t.Fatalf("read after 20: %+v", got)
	}
	// One that had seen Seq 3 missed 12 lines (Seq 4..15).
	if got := r.Read(3, 0, nil); got[0].Dropped != 12 {
		t.Fatalf("read after 3: dropped %d, want 12", got[0].Dropped)
	}
}

func TestRingDropsOldestByBytes(t *testing.T) {
	line := strings.Repeat("x", 1000)
	r := New(1000, 10*(1000+lineOverhead))
	add(r, 30, line+"%d")
	got := r.Read(0, 0, nil)
	if len(got) >= 10 || len(got) == 0 {
		t.Fatalf("kept %d lines of %d bytes in a %d-byte ring", len(got), len(line), 10*(1000+lineOverhead))
	}
	if want := uint64(30 - len(got)); got[0].Dropped != want {
		t.Fatalf("dropped %d, want %d", got[0].Dropped, want)
	}
	if last := got[len(got)-1].Message; last != line+"29" {
		t.Fatalf("newest line lost: %q", last[len(last)-8:])
	}
	// A line bigger than the whole ring is kept, cut.
	r.Add(control.LogLine{Message: strings.Repeat("y", 100000)})
	got = r.Read(30, 0, nil)
	if len(got) != 1 || len(got[0].Message) == 0 || len(got[0].Message) >= 100000 {
		t.Fatalf("huge line: %d lines, %d bytes", len(got), len(got[0].Message))
	}
}

func TestRingPollingSeesEachLineOnce(t *testing.T) {
	r := New(50, 1<<20)
	var seen []string
	var cursor uint64
	next := 0
	for round := range 20 {
		for range round % 7 {
			r.Add(control.LogLine{Message: fmt.Sprintf("m%d", next)})
			next++
		}
		for _, l := range r.Read(cursor, 0, nil) {
			if l.Dropped != 0 {
				t.Fatalf("dropped %d while polling within bounds", l.Dropped)
			}
			seen = append(seen, l.Message)
			cursor = l.Seq
		}
	}
	if len(seen) != next {
		t.Fatalf("saw %d lines, %d written", len(seen), next)
	}
	for i, m := range seen {
		if m != fmt.Sprintf("m%d", i) {
			t.Fatalf("line %d is %q", i, m)
		}
	}
}

func TestRingLimitKeepsNewestAndCountsSkipped(t *testing.T) {
	r := New(100, 1<<20)
	add(r, 30, "l%d")
	got := r.Read(0, 5, nil)
	if len(got) != 5 || got[0].Message != "l25" || got[0].Dropped != 25 {
		t.Fatalf("limit 5: %+v", got)
	}
}

func TestHandlerTeesAndKeepsIdentity(t *testing.T) {
	var out bytes.Buffer
	next := slog.NewTextHandler(&out, &slog.HandlerOptions{Level: slog.LevelInfo})
	r := New(100, 1<<20)
	log := slog.New(NewHandler(next, r, slog.LevelDebug, func(l *control.LogLine) { l.TaskManager = "tm-1" }))
	log = log.With("job", "j1", "tenant", "acme", "subtask", 2)
	log.Debug("quiet", "k", "v w")
	log.WithGroup("g").Info("loud", "n", 3, "tenant", "not-identity")

	got := r.Read(0, 0, nil)
	if len(got) != 2 {
		t.Fatalf("ring has %d lines, want 2", len(got))
	}
	q, l := got[0], got[1]
	if q.Level != "DEBUG" || q.Message != "quiet" || q.Attrs != `k="v w"` || q.JobID != "j1" || q.Tenant != "acme" || q.Subtask != 2 || q.TaskManager != "tm-1" {
		t.Fatalf("debug line = %+v", q)
	}
	if l.Attrs != "g.n=3 g.tenant=not-identity" || l.Tenant != "acme" {
		t.Fatalf("info line = %+v", l)
	}
	if s := out.String(); strings.Contains(s, "quiet") || !strings.Contains(s, "loud") {
		t.Fatalf("next handler got %q: want the info line only", s)
	}
}
