package typed

import (
	"errors"
	"reflect"
	"testing"
)

// memState is the keyed state of one key, and a subtask's operator state,
// in memory. Like the SDK's contexts, Get returns a buffer that the next
// call overwrites.
type memState struct {
	m   map[string][]byte
	buf []byte
}

func newMemState() *memState { return &memState{m: map[string][]byte{}} }

func (s *memState) Get(name string) ([]byte, bool) {
	v, ok := s.m[name]
	s.buf = append(s.buf[:0], v...)
	return s.buf, ok
}
func (s *memState) Put(name string, v []byte) { s.m[name] = append([]byte(nil), v...) }
func (s *memState) Delete(name string)        { delete(s.m, name) }

func (s *memState) OperatorState(name string) ([]byte, bool) { return s.Get("op/" + name) }
func (s *memState) SetOperatorState(name string, v []byte)   { s.Put("op/"+name, v) }
func (s *memState) DeleteOperatorState(name string)          { s.Delete("op/" + name) }

func TestValueState(t *testing.T) {
	ctx := newMemState()
	st := NewValueState("seen", Pair(String(), Int64()))
	if v, ok, err := st.Value(ctx); ok || err != nil || v != (Tuple2[string, int64]{}) {
		t.Fatalf("empty state: %v %v %v", v, ok, err)
	}
	st.Update(ctx, Tuple2[string, int64]{"a", 1})
	st.Update(ctx, Tuple2[string, int64]{"b", 2})
	if v, ok, err := st.Value(ctx); !ok || err != nil || v != (Tuple2[string, int64]{"b", 2}) {
		t.Fatalf("after two updates: %v %v %v", v, ok, err)
	}
	st.Clear(ctx)
	if _, ok, _ := st.Value(ctx); ok {
		t.Fatal("cleared state has a value")
	}
	// State written with another codec does not decode: an error, not a panic.
	ctx.Put("seen", []byte{1})
	if _, _, err := st.Value(ctx); !errors.Is(err, ErrMalformed) {
		t.Fatalf("foreign bytes: %v", err)
	}
}

func TestListState(t *testing.T) {
	ctx := newMemState()
	st := NewListState("events", String())
	if l, err := st.Get(ctx); l != nil || err != nil {
		t.Fatalf("empty list: %v %v", l, err)
	}
	for _, s := range []string{"a", "", "ccc"} {
		st.Add(ctx, s)
	}
	if l, err := st.Get(ctx); err != nil || !reflect.DeepEqual(l, []string{"a", "", "ccc"}) {
		t.Fatalf("list: %q %v", l, err)
	}
	var first []string
	if err := st.All(ctx, func(s string) bool { first = append(first, s); return len(first) < 2 }); err != nil || len(first) != 2 {
		t.Fatalf("All stopping at 2: %q %v", first, err)
	}
	st.Update(ctx, []string{"x"})
	if l, _ := st.Get(ctx); !reflect.DeepEqual(l, []string{"x"}) {
		t.Fatalf("updated list: %q", l)
	}
	st.Update(ctx, nil)
	if _, ok := ctx.m["events"]; ok {
		t.Fatal("an empty Update leaves the entry")
	}
	ctx.Put("events", []byte{5, 'a'})
	if _, err := st.Get(ctx); !errors.Is(err, ErrMalformed) {
		t.Fatalf("truncated list: %v", err)
	}
}

func TestMapState(t *testing.T) {
	ctx := newMemState()
	st := NewMapState("m", String(), Int64())
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(st.Put(ctx, "a", 1))
	must(st.Put(ctx, "b", 2))
	must(st.Put(ctx, "c", 3))
	must(st.Put(ctx, "b", 20)) // in place, keeping the order
	if v, ok, err := st.Get(ctx, "b"); !ok || err != nil || v != 20 {
		t.Fatalf("Get b: %v %v %v", v, ok, err)
	}
	if ok, _ := st.Contains(ctx, "z"); ok {
		t.Fatal("Contains z")
	}
	must(st.Remove(ctx, "a"))
	must(st.Remove(ctx, "nope"))
	var keys []string
	var sum int64
	must(st.All(ctx, func(k string, v int64) bool { keys = append(keys, k); sum += v; return true }))
	if !reflect.DeepEqual(keys, []string{"b", "c"}) || sum != 23 {
		t.Fatalf("entries %q sum %d", keys, sum)
	}
	if n, _ := st.Len(ctx); n != 2 {
		t.Fatalf("Len %d", n)
	}
	must(st.Remove(ctx, "b"))
	must(st.Remove(ctx, "c"))
	if _, ok := ctx.m["m"]; ok {
		t.Fatal("removing the last entry leaves the state entry")
	}
	ctx.Put("m", []byte{1, 'k', 3})
	if err := st.Put(ctx, "k", 1); !errors.Is(err, ErrMalformed) {
		t.Fatalf("Put into a broken map: %v", err)
	}
	if string(ctx.m["m"]) != "\x01k\x03" {
		t.Fatal("Put changed a map that does not decode")
	}
}

func TestOperatorState(t *testing.T) {
	ctx := newMemState()
	st := NewOperatorState("offset", Int64())
	if _, ok, err := st.Get(ctx); ok || err != nil {
		t.Fatal("empty operator state")
	}
	st.Set(ctx, 42)
	if v, ok, err := st.Get(ctx); !ok || err != nil || v != 42 {
		t.Fatalf("Get: %v %v %v", v, ok, err)
	}
	st.Clear(ctx)
	if _, ok, _ := st.Get(ctx); ok {
		t.Fatal("cleared")
	}
}
