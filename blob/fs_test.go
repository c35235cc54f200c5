package blob_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sluicehq/sluice/blob"
	"github.com/sluicehq/sluice/blob/blobtest"
	"github.com/sluicehq/sluice/internal/testutil"
)

func openFS(t *testing.T, dir string) blob.Store {
	t.Helper()
	s, err := blob.OpenFS(context.Background(), blob.FSOptions{Dir: dir})
	if err != nil {
		t.Fatalf("OpenFS(%q): %v", dir, err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func TestFSConformance(t *testing.T) {
	t.Parallel()
	blobtest.Run(t, func(t *testing.T) blob.Store { return openFS(t, t.TempDir()) })
}

// The same suite on the portable path (os.Root for every path), which
// non-Linux systems and kernels without openat2 use.
func TestFSConformancePortable(t *testing.T) {
	t.Parallel()
	blobtest.Run(t, func(t *testing.T) blob.Store {
		s, err := blob.OpenFSPortable(context.Background(), blob.FSOptions{Dir: t.TempDir()})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	})
}

func TestFSLayout(t *testing.T) {
	dir := t.TempDir()
	s := openFS(t, dir)
	if err := s.Put(context.Background(), "tenants/acme/x.bin", strings.NewReader("data"), 4); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, "objects", "tenants", "acme", "x.bin"))
	if err != nil || string(b) != "data" {
		t.Fatalf("object file = %q, %v", b, err)
	}
	tmps, _ := os.ReadDir(filepath.Join(dir, ".sluice-tmp"))
	if len(tmps) != 0 {
		t.Fatalf("temporary files left behind: %v", tmps)
	}
}

// blockingReader hands out n bytes, then blocks until release is closed.
type blockingReader struct {
	n       int
	reached chan struct{}
	release chan struct{}
}

func (b *blockingReader) Read(p []byte) (int, error) {
	if b.n > 0 {
		m := min(len(p), b.n)
		b.n -= m
		return m, nil
	}
	if b.reached != nil {
		close(b.reached)
		b.reached = nil
	}
	<-b.release
	return 0, io.EOF
}

// While a Put is in flight its temporary file exists, but no operation
// shows it.
func TestFSInFlightWriteInvisible(t *testing.T) {
	dir := t.TempDir()
	s := openFS(t, dir)
	ctx := context.Background()
	r := &blockingReader{n: 1 << 20, reached: make(chan struct{}), release: make(chan struct{})}
	reached := r.reached
	done := make(chan error, 1)
	go func() { done <- s.Put(ctx, "inflight/k", r, -1) }()
	<-reached
	tmps, _ := os.ReadDir(filepath.Join(dir, ".sluice-tmp"))
	if len(tmps) != 1 {
		t.Fatalf("want one temporary file during the write, have %v", tmps)
	}
	page, err := s.List(ctx, "", "", 0)
	if err != nil || len(page.Items) != 0 {
		t.Fatalf("List during the write = %+v, %v", page.Items, err)
	}
	if _, err := s.Stat(ctx, "inflight/k"); !errors.Is(err, blob.ErrNotFound) {
		t.Fatalf("Stat during the write = %v", err)
	}
	close(r.release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if info, err := s.Stat(ctx, "inflight/k"); err != nil || info.Size != 1<<20 {
		t.Fatalf("Stat after the write = %+v, %v", info, err)
	}
}

func TestFSStaleTempCleanup(t *testing.T) {
	dir := t.TempDir()
	openFS(t, dir).Close()
	tmp := filepath.Join(dir, ".sluice-tmp")
	old := time.Now().Add(-2 * time.Hour)
	files := map[string]bool{ // name -> should survive
		"put-0123456789abcdef.tmp": false, // ours, stale
		"put-fresh.tmp":            true,  // ours, maybe another process's write
		"notes.txt":                true,  // not ours
	}
	for name, survive := range files {
		p := filepath.Join(tmp, name)
		if err := os.WriteFile(p, []byte("partial"), 0o644); err != nil {
			t.Fatal(err)
		}
		if !survive || name == "notes.txt" {
			os.Chtimes(p, old, old)
		}
	}
	openFS(t, dir)
	for name, survive := range files {
		_, err := os.Stat(filepath.Join(tmp, name))
		if survive != (err == nil) {
			t.Errorf("%s: survived=%v, want %v", name, err == nil, survive)
		}
	}
}

// The crash test runs a child process (this test binary) that writes a
// large object slowly; the parent kills it with SIGKILL mid-write and checks
// that the previous version is intact and no partial object is visible.
const crashChildEnv = "SLUICE_TEST_FS_CRASH_CHILD"

func TestFSCrashMidWrite(t *testing.T) {
	if dir := os.Getenv(crashChildEnv); dir != "" {
		crashChild(dir)
		return
	}
	dir := t.TempDir()
	s := openFS(t, dir)
	ctx := context.Background()
	old := blobtest.PayloadBytes(1, 100<<10)
	if err := s.Put(ctx, "crash/k", bytes.NewReader(old), int64(len(old))); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestFSCrashMidWrite$", "-test.count=1")
	cmd.Env = append(os.Environ(), crashChildEnv+"="+dir)
	var out testutil.SyncBuffer // read while the child writes
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	// Wait until the child's temporary file holds a good part of the data.
	tmp := filepath.Join(dir, ".sluice-tmp")
	testutil.CheckFor(t, 30*time.Second, 5*time.Millisecond, func() error {
		ents, _ := os.ReadDir(tmp)
		var largest int64
		for _, e := range ents {
			if fi, err := e.Info(); err == nil {
				largest = max(largest, fi.Size())
			}
		}
		if largest < 4<<20 {
			return fmt.Errorf("the child's largest temporary file has %d bytes, want 4 MiB; output:\n%s", largest, out.String())
		}
		return nil
	})
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()

	// Readers in the same moment: the old version, whole.
	if got := blobtest.GetBytes(t, s, "crash/k"); !bytes.Equal(got, old) {
		t.Fatalf("after the crash the object has %d bytes, want the old %d", len(got), len(old))
	}
	if got := listKeys(t, s, ""); !slices.Equal(got, []string{"crash/k"}) {
		t.Fatalf("List after the crash = %v", got)
	}
	// Reopening (as after a restart) removes the leftover temporary file.
	s2, err := blob.OpenFS(ctx, blob.FSOptions{Dir: dir, StaleTempAge: time.Nanosecond})
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	if ents, _ := os.ReadDir(tmp); len(ents) != 0 {
		t.Fatalf("temporary files left after reopening: %v", ents)
	}
	if got := blobtest.GetBytes(t, s2, "crash/k"); !bytes.Equal(got, old) {
		t.Fatal("old version damaged after reopening")
	}
}

// crashChild overwrites crash/k with 64 MiB, slowly, until it is killed.
func crashChild(dir string) {
	s, err := blob.OpenFS(context.Background(), blob.FSOptions{Dir: dir})
	if err != nil {
		os.Exit(3)
	}
	r := &slowReader{r: blobtest.Payload(2, 64<<20), delay: 2 * time.Millisecond}
	s.Put(context.Background(), "crash/k", r, 64<<20)
	os.Exit(4) // not reached in time: the parent kills us first
}

// slowReader sleeps before every read, to stretch a transfer out.
type slowReader struct {
	r     io.Reader
	delay time.Duration
}

func (s *slowReader) Read(p []byte) (int, error) {
	time.Sleep(s.delay) // behaviour under test: an injected delay, not a wait

	return s.r.Read(p[:min(len(p), 64<<10)])
}

func listKeys(t *testing.T, s blob.Store, prefix string) []string {
	t.Helper()
	var keys []string
	for info, err := range blob.All(context.Background(), s, prefix) {
		if err != nil {
			t.Fatal(err)
		}
		keys = append(keys, info.Key)
	}
	return keys
}

// A symbolic link planted in the store cannot lead reads or writes outside.
func TestFSSymlinkEscape(t *testing.T) {
	for name, open := range map[string]func(context.Context, blob.FSOptions) (blob.Store, error){
		"openat2":  blob.OpenFS,
		"portable": blob.OpenFSPortable,
	} {
		t.Run(name, func(t *testing.T) { testSymlinkEscape(t, open) })
	}
}

func testSymlinkEscape(t *testing.T, open func(context.Context, blob.FSOptions) (blob.Store, error)) {
	dir, outside := t.TempDir(), t.TempDir()
	s, err := open(context.Background(), blob.FSOptions{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	if err := os.WriteFile(filepath.Join(outside, "secret"), []byte("secret"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(dir, "objects", "evil")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(outside, "secret"), filepath.Join(dir, "objects", "evil-file")); err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"evil/secret", "evil-file"} {
		if rc, err := s.Get(ctx, key); err == nil {
			b, _ := io.ReadAll(rc)
			rc.Close()
			t.Fatalf("Get(%q) read %q from outside the store", key, b)
		}
		if _, err := s.Stat(ctx, key); err == nil {
			t.Fatalf("Stat(%q) succeeded through a symlink", key)
		}
	}
	if err := s.Put(ctx, "evil/planted", strings.NewReader("x"), 1); err == nil {
		t.Fatal("Put through a symlink succeeded")
	}
	if err := s.Delete(ctx, "evil/secret"); err != nil {
		t.Logf("Delete through a symlink: %v", err)
	}
	if b, err := os.ReadFile(filepath.Join(outside, "secret")); err != nil || string(b) != "secret" {
		t.Fatalf("the file outside the store changed: %q, %v", b, err)
	}
	if ents, _ := os.ReadDir(outside); len(ents) != 1 {
		t.Fatalf("files appeared outside the store: %v", ents)
	}
	if got := listKeys(t, s, ""); len(got) != 0 {
		t.Fatalf("List shows %v through symlinks", got)
	}
}

// fs cannot hold "a" and "a/b" at once; it says so instead of failing
// obscurely, and changes nothing.
func TestFSConflict(t *testing.T) {
	s := openFS(t, t.TempDir())
	ctx := context.Background()
	put := func(k, v string) error { return s.Put(ctx, k, strings.NewReader(v), int64(len(v))) }
	if err := put("a", "leaf"); err != nil {
		t.Fatal(err)
	}
	if err := put("a/b", "below"); !errors.Is(err, blob.ErrConflict) {
		t.Fatalf("Put below an object = %v, want ErrConflict", err)
	}
	if err := put("c/d", "below"); err != nil {
		t.Fatal(err)
	}
	if err := put("c", "leaf"); !errors.Is(err, blob.ErrConflict) {
		t.Fatalf("Put over keys = %v, want ErrConflict", err)
	}
	if got := listKeys(t, s, ""); !slices.Equal(got, []string{"a", "c/d"}) {
		t.Fatalf("List = %v", got)
	}
	if err := s.Delete(ctx, "c/d"); err != nil {
		t.Fatal(err)
	}
	if err := put("c", "leaf"); err != nil {
		t.Fatalf("Put after the keys below were deleted: %v", err)
	}
}

func TestOpenFSErrors(t *testing.T) {
	ctx := context.Background()
	file := filepath.Join(t.TempDir(), "file")
	os.WriteFile(file, nil, 0o644)
	for _, c := range []struct {
		dir  string
		kind error
	}{
		{"", blob.ErrInvalidURL},
		{"relative/dir", blob.ErrInvalidURL},
		{file, nil},
		{filepath.Join(file, "below"), nil},
	} {
		s, err := blob.OpenFS(ctx, blob.FSOptions{Dir: c.dir})
		if err == nil {
			s.Close()
			t.Fatalf("OpenFS(%q) succeeded", c.dir)
		}
		if c.kind != nil && !errors.Is(err, c.kind) {
			t.Fatalf("OpenFS(%q) = %v, want %v", c.dir, err, c.kind)
		}
		t.Logf("OpenFS(%q): %v", c.dir, err)
	}
}
