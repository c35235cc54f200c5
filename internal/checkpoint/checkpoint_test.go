package checkpoint_test

import (
	"reflect"
	"testing"

	"github.com/sluicehq/sluice/internal/checkpoint"
	"github.com/sluicehq/sluice/internal/keygroup"
)

func TestSplitID(t *testing.T) {
	s := checkpoint.Split{Key: "tenants/t/files/in.txt", Offset: 100, Length: 50}
	if got, want := s.ID(), "tenants/t/files/in.txt@150"; got != want {
		t.Fatalf("ID() = %q, want %q", got, want)
	}
	// The ID names the end, so every rest of the split has the same one.
	for _, next := range []int64{0, 100, 101, 125, 149} {
		rest, ok := s.Rest(next)
		if !ok {
			t.Fatalf("Rest(%d): ok = false", next)
		}
		if rest.ID() != s.ID() {
			t.Errorf("Rest(%d).ID() = %q, want %q", next, rest.ID(), s.ID())
		}
	}
	// Splits of the same object that end elsewhere differ.
	other := checkpoint.Split{Key: s.Key, Offset: 100, Length: 51}
	if other.ID() == s.ID() {
		t.Errorf("splits ending at 150 and 151 share ID %q", s.ID())
	}
}

func TestSplitRest(t *testing.T) {
	s := checkpoint.Split{Key: "k", Offset: 100, Length: 50} // bytes 100..149
	tests := []struct {
		name   string
		next   int64
		want   checkpoint.Split
		wantOK bool
	}{
		{"before the start", 0, s, true},
		{"just before the start", 99, s, true},
		{"at the start", 100, s, true},
		{"one byte in", 101, checkpoint.Split{Key: "k", Offset: 101, Length: 49}, true},
		{"middle", 120, checkpoint.Split{Key: "k", Offset: 120, Length: 30}, true},
		{"last byte", 149, checkpoint.Split{Key: "k", Offset: 149, Length: 1}, true},
		{"at the end", 150, checkpoint.Split{}, false},
		{"past the end", 1000, checkpoint.Split{}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := s.Rest(tt.next)
			if ok != tt.wantOK || got != tt.want {
				t.Errorf("Rest(%d) = %+v, %v; want %+v, %v", tt.next, got, ok, tt.want, tt.wantOK)
			}
		})
	}

	empty := checkpoint.Split{Key: "k", Offset: 10, Length: 0}
	if got, ok := empty.Rest(10); ok {
		t.Errorf("empty split: Rest(10) = %+v, true; want nothing left", got)
	}
}

func TestRemainingSplits(t *testing.T) {
	a := checkpoint.Split{Key: "a", Offset: 0, Length: 100}
	b := checkpoint.Split{Key: "b", Offset: 0, Length: 100}
	c := checkpoint.Split{Key: "c", Offset: 0, Length: 100}
	rest := func(s checkpoint.Split, next int64) *checkpoint.Split {
		r, ok := s.Rest(next)
		if !ok {
			t.Fatalf("%+v.Rest(%d): nothing left", s, next)
		}
		return &r
	}
	x := checkpoint.Split{Key: "x", Offset: 0, Length: 10} // not in base
	base := []checkpoint.Split{a, b, c}

	tests := []struct {
		name      string
		base      []checkpoint.Split
		positions []checkpoint.SourcePosition
		want      []checkpoint.Split
	}{
		{
			name: "no positions",
			base: base,
			want: base,
		},
		{
			name:      "empty positions",
			base:      base,
			positions: []checkpoint.SourcePosition{{}, {}},
			want:      base,
		},
		{
			name: "finished removed",
			base: base,
			positions: []checkpoint.SourcePosition{
				{Finished: []string{a.ID()}},
				{Finished: []string{c.ID()}},
			},
			want: []checkpoint.Split{b},
		},
		{
			name: "in progress replaced by its rest and first",
			base: base,
			positions: []checkpoint.SourcePosition{
				{Current: rest(c, 40)},
			},
			want: []checkpoint.Split{*rest(c, 40), a, b},
		},
		{
			name: "in progress rests in position order",
			base: base,
			positions: []checkpoint.SourcePosition{
				{Current: rest(c, 40)},
				{Finished: []string{a.ID()}, Current: rest(b, 10)},
			},
			want: []checkpoint.Split{*rest(c, 40), *rest(b, 10)},
		},
		{
			name: "in progress and finished elsewhere dropped",
			base: base,
			positions: []checkpoint.SourcePosition{
				{Current: rest(b, 50)},
				{Finished: []string{b.ID()}},
			},
			want: []checkpoint.Split{a, c},
		},
		{
			name: "finished before in progress dropped",
			base: base,
			positions: []checkpoint.SourcePosition{
				{Finished: []string{b.ID()}},
				{Current: rest(b, 50)},
			},
			want: []checkpoint.Split{a, c},
		},
		{
			name: "same current twice kept once",
			base: base,
			positions: []checkpoint.SourcePosition{
				{Current: rest(a, 30)},
				{Current: rest(a, 30)},
			},
			want: []checkpoint.Split{*rest(a, 30), b, c},
		},
		{
			name: "current not in base included",
			base: base,
			positions: []checkpoint.SourcePosition{
				{Current: &x},
			},
			want: []checkpoint.Split{x, a, b, c},
		},
		{
			name: "current without base",
			positions: []checkpoint.SourcePosition{
				{Finished: []string{a.ID()}, Current: rest(b, 1)},
			},
			want: []checkpoint.Split{*rest(b, 1)},
		},
		{
			name: "everything finished",
			base: base,
			positions: []checkpoint.SourcePosition{
				{Finished: []string{a.ID(), b.ID(), c.ID()}},
			},
			want: nil,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := checkpoint.RemainingSplits(tt.base, tt.positions)
			if len(got) == 0 && len(tt.want) == 0 {
				return
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("RemainingSplits =\n\t%+v\nwant\n\t%+v", got, tt.want)
			}
		})
	}
}

func TestRemainingSplitsKeepsBase(t *testing.T) {
	a := checkpoint.Split{Key: "a", Offset: 0, Length: 100}
	b := checkpoint.Split{Key: "b", Offset: 0, Length: 100}
	base := []checkpoint.Split{a, b}
	r, _ := b.Rest(60)
	checkpoint.RemainingSplits(base, []checkpoint.SourcePosition{{Finished: []string{a.ID()}, Current: &r}})
	if !reflect.DeepEqual(base, []checkpoint.Split{a, b}) {
		t.Errorf("base changed to %+v", base)
	}
}

const maxP = 128

// handles returns the metadata entries of the subtasks of a chain at
// parallelism p, each with the key groups keygroup.Range gives it.
func handles(vertices []int, p int) []checkpoint.TaskState {
	var out []checkpoint.TaskState
	for i := 0; i < p; i++ {
		start, end := keygroup.Range(i, p, maxP)
		out = append(out, checkpoint.TaskState{
			Vertices:    vertices,
			Subtask:     i,
			Parallelism: p,
			State: checkpoint.StateHandle{
				Key:           "cp/7/" + checkpoint.StateObject(vertices, i),
				Size:          int64(100 + i),
				KeyGroupStart: start,
				KeyGroupEnd:   end,
			},
		})
	}
	return out
}

func TestRestoreFor(t *testing.T) {
	chain := []int{1, 2}
	other := []int{5}
	m := &checkpoint.Metadata{ID: 7, MaxParallelism: maxP}
	m.Tasks = append(m.Tasks, handles(other, 2)...) // shares no vertex: ignored
	m.Tasks = append(m.Tasks, handles(chain, 2)...)
	key := func(subtasks ...int) []string {
		var out []string
		for _, s := range subtasks {
			out = append(out, "cp/7/"+checkpoint.StateObject(chain, s))
		}
		return out
	}

	tests := []struct {
		name     string
		vertices []int
		subtask  int
		p        int
		want     []string // keys of the picked snapshots, in order
	}{
		{"same parallelism subtask 0", chain, 0, 2, key(0)},
		{"same parallelism subtask 1", chain, 1, 2, key(1)},
		{"shares a vertex only", []int{2, 3}, 1, 2, key(1)},
		{"head vertex only", []int{1}, 0, 2, key(0)},
		{"rescale 2 to 3 subtask 0", chain, 0, 3, key(0)},
		{"rescale 2 to 3 subtask 1", chain, 1, 3, key(0, 1)},
		{"rescale 2 to 3 subtask 2", chain, 2, 3, key(1)},
		{"rescale 2 to 1", chain, 0, 1, key(0, 1)},
		{"no shared vertex", []int{9}, 0, 2, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			start, end := keygroup.Range(tt.subtask, tt.p, maxP)
			r := checkpoint.RestoreFor(m, tt.vertices, start, end)
			if r.CheckpointID != 7 {
				t.Errorf("CheckpointID = %d, want 7", r.CheckpointID)
			}
			var got []string
			for _, h := range r.States {
				got = append(got, h.Key)
				if h.KeyGroupEnd < start || h.KeyGroupStart > end {
					t.Errorf("picked %s with key groups %d..%d, not overlapping %d..%d",
						h.Key, h.KeyGroupStart, h.KeyGroupEnd, start, end)
				}
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("picked %q, want %q", got, tt.want)
			}
		})
	}
}

func TestRestoreForBoundaries(t *testing.T) {
	// Inclusive ranges: touching at one key group is an overlap.
	m := &checkpoint.Metadata{ID: 1, MaxParallelism: maxP, Tasks: []checkpoint.TaskState{
		{Vertices: []int{1}, State: checkpoint.StateHandle{Key: "lo", KeyGroupStart: 0, KeyGroupEnd: 9}},
		{Vertices: []int{1}, State: checkpoint.StateHandle{Key: "hi", KeyGroupStart: 10, KeyGroupEnd: 19}},
	}}
	tests := []struct {
		start, end int
		want       []string
	}{
		{0, 9, []string{"lo"}},
		{9, 9, []string{"lo"}},
		{9, 10, []string{"lo", "hi"}},
		{10, 10, []string{"hi"}},
		{19, 30, []string{"hi"}},
		{20, 30, nil},
	}
	for _, tt := range tests {
		var got []string
		for _, h := range checkpoint.RestoreFor(m, []int{1}, tt.start, tt.end).States {
			got = append(got, h.Key)
		}
		if !reflect.DeepEqual(got, tt.want) {
			t.Errorf("%d..%d: picked %q, want %q", tt.start, tt.end, got, tt.want)
		}
	}
}

func TestTaskKeyAndStateObject(t *testing.T) {
	tests := []struct {
		vertices []int
		subtask  int
		key      string
		object   string
	}{
		{[]int{1, 2, 3}, 0, "1_2_3", "task-1_2_3-0.state"},
		{[]int{7}, 12, "7", "task-7-12.state"},
		{[]int{10, 200}, 3, "10_200", "task-10_200-3.state"},
		{nil, 0, "", "task--0.state"},
	}
	for _, tt := range tests {
		if got := checkpoint.TaskKey(tt.vertices); got != tt.key {
			t.Errorf("TaskKey(%v) = %q, want %q", tt.vertices, got, tt.key)
		}
		if got := checkpoint.StateObject(tt.vertices, tt.subtask); got != tt.object {
			t.Errorf("StateObject(%v, %d) = %q, want %q", tt.vertices, tt.subtask, got, tt.object)
		}
	}
}
