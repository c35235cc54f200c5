package statecodec

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"strings"
	"testing"
)

// timerKey is a key of the layout the store uses: u32 vertex, i64 time, key.
func timerKey(vertex uint32, t int64, key string) string {
	b := binary.LittleEndian.AppendUint32(nil, vertex)
	b = binary.LittleEndian.AppendUint64(b, uint64(t))
	return string(append(b, key...))
}

func sample() []byte {
	e := NewEncoder([]byte("prefix"), 16, 4, 7)
	e.Ops(1)
	e.Entry("op", []byte("42"))
	e.Group(5, 2)
	e.Entry("a", []byte("1"))
	e.Entry("b", nil)
	e.Timers(1)
	e.Timer(timerKey(3, 99, "a"))
	e.Group(7, 0)
	e.Timers(0)
	return e.Finish()[len("prefix"):]
}

// render lists what a snapshot holds, one line per item.
func render(s *Snapshot) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d %d..%d\n", s.MaxParallelism, s.Start, s.End)
	for _, e := range s.Ops {
		fmt.Fprintf(&b, "op %q=%q\n", e.Key, e.Value)
	}
	for _, g := range s.Groups {
		fmt.Fprintf(&b, "group %d\n", g.KeyGroup)
		for _, e := range g.Entries {
			fmt.Fprintf(&b, "  kv %q=%q\n", e.Key, e.Value)
		}
		for _, tk := range g.Timers {
			fmt.Fprintf(&b, "  timer %x\n", tk)
		}
	}
	return b.String()
}

func TestRoundTrip(t *testing.T) {
	s, err := Decode(sample(), 16)
	if err != nil {
		t.Fatal(err)
	}
	want := "16 4..7\nop \"op\"=\"42\"\ngroup 5\n  kv \"a\"=\"1\"\n  kv \"b\"=\"\"\n  timer " +
		fmt.Sprintf("%x", timerKey(3, 99, "a")) + "\ngroup 7\n"
	if got := render(s); got != want {
		t.Errorf("decoded\n%s\nwant\n%s", got, want)
	}
}

// resum replaces the checksum of b after an edit.
func resum(b []byte) []byte {
	b = bytes.Clone(b)
	binary.LittleEndian.PutUint32(b[len(b)-4:], crc32.ChecksumIEEE(b[:len(b)-4]))
	return b
}

func TestDecodeRejects(t *testing.T) {
	good := sample()
	edit := func(off int, v uint32) []byte {
		b := bytes.Clone(good)
		binary.LittleEndian.PutUint32(b[off:], v)
		return resum(b)
	}
	flip := bytes.Clone(good)
	flip[30] ^= 1
	shortTimer := NewEncoder(nil, 16, 0, 15)
	shortTimer.Ops(0)
	shortTimer.Group(1, 0)
	shortTimer.Timers(1)
	shortTimer.Timer("short")
	for _, tc := range []struct {
		name string
		b    []byte
		want string
	}{
		{"empty", nil, "no SLST header"},
		{"garbage", []byte("not a snapshot at all, no"), "no SLST header"},
		{"truncated", good[:len(good)-9], "checksum mismatch"},
		{"corrupt", flip, "checksum mismatch"},
		{"version", edit(4, 2), "version 2, want 1"},
		{"group outside the range", edit(36, 9), "key group 9 outside the snapshot's range 4..7"},
		{"short timer key", shortTimer.Finish(), "timer entry of 5 bytes"},
		{"no end of groups", resum(append(bytes.Clone(good[:len(good)-8]), 0, 0, 0, 0)), "truncated"},
		{"after the end", resum(append(append(bytes.Clone(good[:len(good)-4]), 1), 0, 0, 0, 0)), "1 trailing bytes"},
	} {
		if _, err := Decode(tc.b, 16); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want %q", tc.name, err, tc.want)
		}
	}
	if _, err := Decode(good, 32); err == nil || !strings.Contains(err.Error(), "max parallelism 16, this state has 32") {
		t.Errorf("other max parallelism: %v", err)
	}
}

// FuzzDecode: Decode refuses or decodes any bytes, and what it decodes
// encodes back to a snapshot that decodes the same.
func FuzzDecode(f *testing.F) {
	f.Add(sample())
	f.Add([]byte("SLST"))
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := Decode(b, 16)
		if err != nil {
			return
		}
		e := NewEncoder(nil, s.MaxParallelism, s.Start, s.End)
		e.Ops(len(s.Ops))
		for _, en := range s.Ops {
			e.Entry(string(en.Key), en.Value)
		}
		for _, g := range s.Groups {
			e.Group(g.KeyGroup, len(g.Entries))
			for _, en := range g.Entries {
				e.Entry(string(en.Key), en.Value)
			}
			e.Timers(len(g.Timers))
			for _, tk := range g.Timers {
				e.Timer(string(tk))
			}
		}
		again, err := Decode(e.Finish(), 16)
		if err != nil {
			t.Fatalf("re-encoded snapshot: %v", err)
		}
		if render(again) != render(s) {
			t.Fatalf("round trip changed the snapshot:\n%s\nvs\n%s", render(again), render(s))
		}
	})
}
