package wasmhost

import (
	"bytes"
	"errors"
	"fmt"
	"testing"

	"github.com/sluicehq/sluice/internal/keygroup"
)

// The exported state calls are the ABI's, and what they write is what the
// snapshot holds.
func TestStateAPI(t *testing.T) {
	s := NewState(8, 0, 7)
	for _, k := range []string{"c", "a", "b"} {
		if err := s.Put(3, "n", []byte(k), []byte("v"+k), 0); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Put(3, "other", []byte("z"), nil, 0); err != nil {
		t.Fatal(err)
	}
	if v, ok, err := s.Get(3, "n", []byte("a")); err != nil || !ok || string(v) != "va" {
		t.Fatalf("get: %q %v %v", v, ok, err)
	}
	if err := s.Delete(3, "n", []byte("c")); err != nil {
		t.Fatal(err)
	}
	keys := s.Keys(3, "n")
	if len(keys) != 2 {
		t.Fatalf("keys %q", keys)
	}
	if g0, g1 := keygroup.Of(keys[0], 8), keygroup.Of(keys[1], 8); g0 > g1 || g0 == g1 && bytes.Compare(keys[0], keys[1]) > 0 {
		t.Errorf("keys %q not by key group, then key", keys)
	}
	if err := s.PutOperatorState(3, "pos", []byte{7}, 0); err != nil {
		t.Fatal(err)
	}
	for _, tm := range []Timer{{3, []byte("b"), 20}, {3, []byte("a"), 10}, {3, []byte("a"), 30}} {
		if err := s.RegisterTimer(tm.Vertex, tm.Key, tm.TimeMs, 0); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.DeleteTimer(3, []byte("a"), 30); err != nil {
		t.Fatal(err)
	}
	if at, ok := s.NextTimer(); !ok || at != 10 {
		t.Errorf("next timer %d %v", at, ok)
	}

	// A snapshot restores all of it, also into a subtask of a rescale.
	f := s.Freeze()
	snap := f.AppendTo(nil)
	f.Release()
	r := NewState(8, 0, 3)
	if err := r.Restore(bytes.NewReader(snap)); err != nil {
		t.Fatal(err)
	}
	if v, ok := r.OperatorState(3, "pos"); !ok || !bytes.Equal(v, []byte{7}) {
		t.Errorf("operator state %v %v", v, ok)
	}
	for _, k := range []string{"a", "b"} {
		v, ok, err := r.Get(3, "n", []byte(k))
		if held := keygroup.Of([]byte(k), 8) <= 3; held != (err == nil) || held && (!ok || string(v) != "v"+k) {
			t.Errorf("restored %q: %q %v %v", k, v, ok, err)
		}
	}
	if got := fmt.Sprint(s.PopDueTimers(25)); got != fmt.Sprint([]Timer{{3, []byte("a"), 10}, {3, []byte("b"), 20}}) {
		t.Errorf("due timers %s", got)
	}
	if _, ok := s.NextTimer(); ok {
		t.Error("a timer is left")
	}

	// Keys outside the key groups and the limit are refused.
	out := []byte("x0")
	for i := 1; keygroup.Of(out, 8) <= 3; i++ {
		out = []byte(fmt.Sprint("x", i))
	}
	if err := r.Put(3, "n", out, nil, 0); err == nil {
		t.Errorf("key %q outside the key groups was stored", out)
	}
	if err := s.Put(3, "n", []byte("big"), make([]byte, 1000), 1000); !errors.Is(err, ErrMemoryLimit) {
		t.Errorf("over the limit: %v", err)
	}
	if err := s.RegisterTimer(3, []byte("big"), 1, 10); !errors.Is(err, ErrMemoryLimit) {
		t.Errorf("timer over the limit: %v", err)
	}
}
