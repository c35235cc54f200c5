package checkpoint_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"reflect"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/blob"
	"github.com/sluicehq/sluice/internal/checkpoint"
)

func sampleMetadata() *checkpoint.Metadata {
	return &checkpoint.Metadata{
		JobID:          "job-1",
		Tenant:         "acme",
		ID:             42,
		Savepoint:      true,
		SavepointID:    "sp-1",
		ModuleDigest:   "sha256:abcd",
		MaxParallelism: 128,
		TriggeredMs:    1_700_000_000_000,
		CompletedMs:    1_700_000_000_250,
		Tasks: []checkpoint.TaskState{
			{Vertices: []int{1, 2}, Subtask: 0, Parallelism: 2, State: checkpoint.StateHandle{
				Key: "cp/42/task-1_2-0.state", Size: 10, KeyGroupStart: 0, KeyGroupEnd: 63}},
			{Vertices: []int{1, 2}, Subtask: 1, Parallelism: 2, State: checkpoint.StateHandle{
				Key: "cp/42/task-1_2-1.state", Size: 32, KeyGroupStart: 64, KeyGroupEnd: 127}},
		},
		Sources: map[int][]checkpoint.Split{
			1:  {{Key: "in/a.txt", Offset: 0, Length: 100}, {Key: "in/b.txt", Offset: 7, Length: 3}},
			12: {{Key: "in/c.txt", Offset: 5, Length: 1}},
		},
		SinkParts: []checkpoint.SinkPart{
			{Pending: "pending/3-0-a1-0", Final: "files/out/part-job-1-3-0-a1-0", Size: 99},
		},
	}
}

func TestMetadataRoundTrip(t *testing.T) {
	m := sampleMetadata()
	b, err := m.Encode()
	if err != nil {
		t.Fatal(err)
	}
	if m.Version != 0 {
		t.Errorf("Encode changed m.Version to %d", m.Version)
	}
	got, err := checkpoint.Decode(b)
	if err != nil {
		t.Fatalf("Decode(%s): %v", b, err)
	}
	want := sampleMetadata()
	want.Version = 1
	if !reflect.DeepEqual(got, want) {
		t.Errorf("round trip:\n got %+v\nwant %+v", got, want)
	}

	// A checkpoint (not a savepoint) without sources or sink parts.
	plain := &checkpoint.Metadata{JobID: "j", ID: 1, MaxParallelism: 1}
	b, err = plain.Encode()
	if err != nil {
		t.Fatal(err)
	}
	got, err = checkpoint.Decode(b)
	if err != nil {
		t.Fatal(err)
	}
	if got.ID != 1 || got.MaxParallelism != 1 || got.Savepoint || len(got.Sources) != 0 || len(got.SinkParts) != 0 || len(got.Tasks) != 0 {
		t.Errorf("plain round trip: %+v", got)
	}
}

func TestDecodeRejects(t *testing.T) {
	tests := []struct {
		name string
		in   string
	}{
		{"empty", ""},
		{"not json", "not json"},
		{"truncated", `{"version":1,"id":1,`},
		{"array", `[1,2]`},
		{"wrong type", `{"version":"1","id":1,"max_parallelism":1}`},
		{"no version", `{"id":1,"max_parallelism":1}`},
		{"version 2", `{"version":2,"id":1,"max_parallelism":1}`},
		{"id 0", `{"version":1,"id":0,"max_parallelism":1}`},
		{"id missing", `{"version":1,"max_parallelism":1}`},
		{"id negative", `{"version":1,"id":-3,"max_parallelism":1}`},
		{"max parallelism 0", `{"version":1,"id":1,"max_parallelism":0}`},
		{"max parallelism missing", `{"version":1,"id":1}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := checkpoint.Decode([]byte(tt.in))
			if !errors.Is(err, checkpoint.ErrBadMetadata) {
				t.Errorf("Decode(%q) = %+v, %v; want ErrBadMetadata", tt.in, m, err)
			}
			if m != nil {
				t.Errorf("Decode(%q) returned metadata with an error", tt.in)
			}
		})
	}
}

func TestMetadataSize(t *testing.T) {
	if n := (&checkpoint.Metadata{}).Size(); n != 0 {
		t.Errorf("empty: Size() = %d", n)
	}
	if n := sampleMetadata().Size(); n != 42 {
		t.Errorf("Size() = %d, want 42", n)
	}
}

// FuzzDecode feeds arbitrary bytes to Decode, which must reject them with
// ErrBadMetadata or return metadata that encodes and decodes to itself.
func FuzzDecode(f *testing.F) {
	b, _ := sampleMetadata().Encode()
	f.Add(b)
	f.Add([]byte(`{"version":1,"id":1,"max_parallelism":1}`))
	f.Add([]byte(`{"version":1,"id":1,"max_parallelism":1,"sources":{"x":[]}}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := checkpoint.Decode(b)
		if err != nil {
			if !errors.Is(err, checkpoint.ErrBadMetadata) {
				t.Fatalf("error not ErrBadMetadata: %v", err)
			}
			return
		}
		again, err := m.Encode()
		if err != nil {
			t.Fatal(err)
		}
		m2, err := checkpoint.Decode(again)
		if err != nil {
			t.Fatalf("re-decode: %v", err)
		}
		if m2.ID != m.ID || m2.MaxParallelism != m.MaxParallelism || len(m2.Tasks) != len(m.Tasks) {
			t.Fatalf("re-decode: %+v, want %+v", m2, m)
		}
	})
}

func openStore(t *testing.T) blob.Store {
	t.Helper()
	s, err := blob.OpenFS(context.Background(), blob.FSOptions{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func put(t *testing.T, s blob.Store, key, data string) {
	t.Helper()
	if err := s.Put(context.Background(), key, strings.NewReader(data), int64(len(data))); err != nil {
		t.Fatal(err)
	}
}

func get(t *testing.T, s blob.Store, key string) string {
	t.Helper()
	rc, err := s.Get(context.Background(), key)
	if err != nil {
		t.Fatalf("get %s: %v", key, err)
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func exists(t *testing.T, s blob.Store, key string) bool {
	t.Helper()
	_, err := s.Stat(context.Background(), key)
	if err != nil && !errors.Is(err, blob.ErrNotFound) {
		t.Fatalf("stat %s: %v", key, err)
	}
	return err == nil
}

func keys(t *testing.T, s blob.Store, prefix string) []string {
	t.Helper()
	var out []string
	for o, err := range blob.All(context.Background(), s, prefix) {
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, o.Key)
	}
	return out
}

const cpDir = "tenants/acme/jobs/job-1/checkpoints/"

func TestWriteReadMetadata(t *testing.T) {
	ctx := context.Background()
	s := openStore(t)
	dir := cpDir + "00000000000000000042/"
	m := sampleMetadata()
	if err := checkpoint.WriteMetadata(ctx, s, dir, m); err != nil {
		t.Fatal(err)
	}
	if !exists(t, s, dir+checkpoint.MetadataObject) {
		t.Fatalf("no %s after WriteMetadata", dir+checkpoint.MetadataObject)
	}
	got, err := checkpoint.ReadMetadata(ctx, s, dir)
	if err != nil {
		t.Fatal(err)
	}
	want := sampleMetadata()
	want.Version = 1
	if !reflect.DeepEqual(got, want) {
		t.Errorf("read back:\n got %+v\nwant %+v", got, want)
	}
}

func TestReadMetadataMissing(t *testing.T) {
	ctx := context.Background()
	s := openStore(t)
	dir := cpDir + "00000000000000000001/"
	// A directory with state but no metadata does not exist as a checkpoint.
	put(t, s, dir+"task-1-0.state", "state")
	for _, d := range []string{dir, cpDir + "00000000000000000002/"} {
		m, err := checkpoint.ReadMetadata(ctx, s, d)
		if !errors.Is(err, blob.ErrNotFound) {
			t.Errorf("ReadMetadata(%s) = %+v, %v; want blob.ErrNotFound", d, m, err)
		}
	}
}

func TestReadMetadataBad(t *testing.T) {
	s := openStore(t)
	dir := cpDir + "00000000000000000003/"
	put(t, s, dir+checkpoint.MetadataObject, `{"version":9}`)
	if _, err := checkpoint.ReadMetadata(context.Background(), s, dir); !errors.Is(err, checkpoint.ErrBadMetadata) {
		t.Errorf("err = %v, want ErrBadMetadata", err)
	}
}

func TestDeletePrefix(t *testing.T) {
	ctx := context.Background()
	s := openStore(t)
	one := cpDir + "00000000000000000001/"
	ten := cpDir + "00000000000000000010/"
	for _, dir := range []string{one, ten} {
		if err := checkpoint.WriteMetadata(ctx, s, dir, sampleMetadata()); err != nil {
			t.Fatal(err)
		}
		put(t, s, dir+"task-1_2-0.state", "s0")
		put(t, s, dir+"task-1_2-1.state", "s1")
		put(t, s, dir+"nested/deeper", "n")
	}
	if err := checkpoint.DeletePrefix(ctx, s, one); err != nil {
		t.Fatal(err)
	}
	if _, err := checkpoint.ReadMetadata(ctx, s, one); !errors.Is(err, blob.ErrNotFound) {
		t.Errorf("metadata after delete: err = %v, want blob.ErrNotFound", err)
	}
	if left := keys(t, s, one); len(left) != 0 {
		t.Errorf("left under %s: %q", one, left)
	}
	want := []string{ten + checkpoint.MetadataObject, ten + "nested/deeper", ten + "task-1_2-0.state", ten + "task-1_2-1.state"}
	if got := keys(t, s, ten); !reflect.DeepEqual(got, want) {
		t.Errorf("sibling %s holds %q, want %q", ten, got, want)
	}
	if _, err := checkpoint.ReadMetadata(ctx, s, ten); err != nil {
		t.Errorf("sibling metadata: %v", err)
	}

	// Deleting again, or a prefix that never held anything, succeeds.
	if err := checkpoint.DeletePrefix(ctx, s, one); err != nil {
		t.Errorf("delete again: %v", err)
	}
	if err := checkpoint.DeletePrefix(ctx, s, cpDir+"00000000000000000099/"); err != nil {
		t.Errorf("delete empty prefix: %v", err)
	}
}

func TestDeletePrefixWithoutMetadata(t *testing.T) {
	// An aborted checkpoint has state but no metadata.
	ctx := context.Background()
	s := openStore(t)
	dir := cpDir + "00000000000000000005/"
	put(t, s, dir+"task-1-0.state", "s")
	if err := checkpoint.DeletePrefix(ctx, s, dir); err != nil {
		t.Fatal(err)
	}
	if left := keys(t, s, dir); len(left) != 0 {
		t.Errorf("left: %q", left)
	}
}

func TestCopy(t *testing.T) {
	ctx := context.Background()
	s := openStore(t)
	data := strings.Repeat("state bytes ", 1000)
	put(t, s, "cp/1/task-1-0.state", data)
	n, err := checkpoint.Copy(ctx, s, "cp/1/task-1-0.state", "sp/x/task-1-0.state")
	if err != nil {
		t.Fatal(err)
	}
	if n != int64(len(data)) {
		t.Errorf("Copy returned %d, want %d", n, len(data))
	}
	if got := get(t, s, "sp/x/task-1-0.state"); got != data {
		t.Errorf("copy holds %d bytes, want the %d of the source", len(got), len(data))
	}
	if got := get(t, s, "cp/1/task-1-0.state"); got != data {
		t.Error("source changed")
	}

	// Empty objects copy too.
	put(t, s, "cp/1/empty", "")
	if n, err := checkpoint.Copy(ctx, s, "cp/1/empty", "sp/x/empty"); err != nil || n != 0 {
		t.Errorf("copy empty: %d, %v", n, err)
	}
	if !exists(t, s, "sp/x/empty") {
		t.Error("empty copy missing")
	}

	if _, err := checkpoint.Copy(ctx, s, "cp/1/missing", "sp/x/missing"); !errors.Is(err, blob.ErrNotFound) {
		t.Errorf("copy missing: err = %v, want blob.ErrNotFound", err)
	}
	if exists(t, s, "sp/x/missing") {
		t.Error("copy of a missing object created the target")
	}
}

func part(i string) checkpoint.SinkPart {
	return checkpoint.SinkPart{
		Pending: "tenants/acme/jobs/job-1/pending/3-0-a1-" + i,
		Final:   "tenants/acme/files/out/part-job-1-3-0-a1-" + i,
	}
}

func TestCommit(t *testing.T) {
	ctx := context.Background()
	s := openStore(t)
	parts := []checkpoint.SinkPart{part("0"), part("1")}
	for i, p := range parts {
		put(t, s, p.Pending, "records of part "+string(rune('0'+i)))
	}
	if err := checkpoint.Commit(ctx, s, parts); err != nil {
		t.Fatal(err)
	}
	check := func() {
		t.Helper()
		for i, p := range parts {
			if exists(t, s, p.Pending) {
				t.Errorf("pending %s still exists", p.Pending)
			}
			if got, want := get(t, s, p.Final), "records of part "+string(rune('0'+i)); got != want {
				t.Errorf("final %s = %q, want %q", p.Final, got, want)
			}
		}
	}
	check()

	// Committing again (a restore re-commits the checkpoint's parts) is a
	// no-op.
	if err := checkpoint.Commit(ctx, s, parts); err != nil {
		t.Fatalf("commit again: %v", err)
	}
	check()

	if err := checkpoint.Commit(ctx, s, nil); err != nil {
		t.Errorf("commit nothing: %v", err)
	}
}

func TestCommitPendingAndFinal(t *testing.T) {
	// A crash after the copy and before the delete leaves both: committing
	// again finishes the job.
	ctx := context.Background()
	s := openStore(t)
	p := part("0")
	put(t, s, p.Pending, "new")
	put(t, s, p.Final, "new")
	if err := checkpoint.Commit(ctx, s, []checkpoint.SinkPart{p}); err != nil {
		t.Fatal(err)
	}
	if exists(t, s, p.Pending) {
		t.Error("pending still exists")
	}
	if got := get(t, s, p.Final); got != "new" {
		t.Errorf("final = %q", got)
	}
}

func TestCommitLostPart(t *testing.T) {
	ctx := context.Background()
	s := openStore(t)
	ok1, lost, ok2 := part("0"), part("1"), part("2")
	put(t, s, ok1.Pending, "zero")
	put(t, s, ok2.Pending, "two")
	err := checkpoint.Commit(ctx, s, []checkpoint.SinkPart{ok1, lost, ok2})
	if err == nil {
		t.Fatal("commit with a lost part succeeded")
	}
	if !strings.Contains(err.Error(), lost.Pending) {
		t.Errorf("error %q does not name the lost part %s", err, lost.Pending)
	}
	// The part before the lost one stays committed; the one after is left
	// pending for a later commit.
	if exists(t, s, ok1.Pending) || get(t, s, ok1.Final) != "zero" {
		t.Errorf("part before the lost one not committed")
	}
	if exists(t, s, lost.Final) {
		t.Errorf("lost part has a final object")
	}
	if !exists(t, s, ok2.Pending) {
		t.Errorf("part after the lost one: pending gone")
	}
}

func TestCommitBytes(t *testing.T) {
	// Larger than one copy buffer, with every byte value.
	ctx := context.Background()
	s := openStore(t)
	data := bytes.Repeat([]byte{0, 1, 2, 0xff, '\n'}, 200_000)
	p := part("big")
	if err := s.Put(ctx, p.Pending, bytes.NewReader(data), int64(len(data))); err != nil {
		t.Fatal(err)
	}
	if err := checkpoint.Commit(ctx, s, []checkpoint.SinkPart{p}); err != nil {
		t.Fatal(err)
	}
	if got := get(t, s, p.Final); got != string(data) {
		t.Errorf("final holds %d bytes, want %d", len(got), len(data))
	}
}
