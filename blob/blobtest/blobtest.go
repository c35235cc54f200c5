package blobtest

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice/blob"
)

const (
	kib = 1 << 10
	mib = 1 << 20
)

// Option adjusts Run.
type Option func(*config)

type config struct{ skip map[string]string }

// Skip skips the named test of the suite (as listed by go test -v, e.g.
// "PutDeleteRace") with a reason, for a known defect of the server under
// test that the backend cannot work around. The skip shows in the test log.
func Skip(name, reason string) Option {
	return func(c *config) { c.skip[name] = reason }
}

// Run runs the conformance suite. newStore must return a fresh, empty
// store for each call, and close it when t ends. A backend with a
// multipart path should use a small part size (5 MiB) so that the larger
// cases cross it.
func Run(t *testing.T, newStore func(t *testing.T) blob.Store, opts ...Option) {
	cfg := config{skip: map[string]string{}}
	for _, o := range opts {
		o(&cfg)
	}
	tests := []struct {
		name string
		fn   func(*testing.T, blob.Store)
	}{
		{"RoundTrip", testRoundTrip},
		{"Stat", testStat},
		{"Range", testRange},
		{"List", testList},
		{"Overwrite", testOverwrite},
		{"Delete", testDelete},
		{"NotFound", testNotFound},
		{"InvalidKeys", testInvalidKeys},
		{"SizeMismatch", testSizeMismatch},
		{"ConcurrentWriters", testConcurrentWriters},
		{"PutDeleteRace", testPutDeleteRace},
		{"FaultMidStream", testFaultMidStream},
		{"ContextCanceled", testContextCanceled},
		{"Modules", testModules},
		{"Closed", testClosed},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if reason, ok := cfg.skip[tc.name]; ok {
				t.Skip(reason)
			}
			tc.fn(t, newStore(t))
		})
	}
}

// Payload returns n deterministic pseudo-random bytes derived from seed, as
// a stream that is neither an io.Seeker nor an io.ReaderAt.
func Payload(seed uint64, n int64) io.Reader {
	var s [32]byte
	copy(s[:], strconv.FormatUint(seed, 10))
	return io.LimitReader(rand.NewChaCha8(s), n)
}

// PayloadBytes is Payload read into memory; use it for small sizes only.
func PayloadBytes(seed uint64, n int64) []byte {
	b, _ := io.ReadAll(Payload(seed, n))
	return b
}

// PayloadHash is the sha256 of Payload(seed, n).
func PayloadHash(seed uint64, n int64) [32]byte {
	h := sha256.New()
	io.Copy(h, Payload(seed, n))
	return [32]byte(h.Sum(nil))
}

// readHash reads rc to the end, closes it, and returns the hash and length.
func readHash(t *testing.T, rc io.ReadCloser) ([32]byte, int64) {
	t.Helper()
	defer rc.Close()
	h := sha256.New()
	n, err := io.Copy(h, rc)
	if err != nil {
		t.Fatalf("read: %v", err)
	}
	return [32]byte(h.Sum(nil)), n
}

func put(t *testing.T, s blob.Store, key string, r io.Reader, size int64) {
	t.Helper()
	if err := s.Put(context.Background(), key, r, size); err != nil {
		t.Fatalf("Put(%q, size %d): %v", key, size, err)
	}
}

// GetBytes reads the whole object at key, failing the test on any error.
func GetBytes(t *testing.T, s blob.Store, key string) []byte {
	t.Helper()
	rc, err := s.Get(context.Background(), key)
	if err != nil {
		t.Fatalf("Get(%q): %v", key, err)
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		t.Fatalf("Get(%q): read: %v", key, err)
	}
	return b
}

// wantErr fails unless err wraps want.
func wantErr(t *testing.T, err, want error, what string) {
	t.Helper()
	if !errors.Is(err, want) {
		t.Fatalf("%s: got error %v, want one wrapping %q", what, err, want)
	}
}

func wantNotFound(t *testing.T, s blob.Store, key string) {
	t.Helper()
	_, err := s.Stat(context.Background(), key)
	wantErr(t, err, blob.ErrNotFound, fmt.Sprintf("Stat(%q)", key))
}

// keys lists every key under prefix.
func keys(t *testing.T, s blob.Store, prefix string) []string {
	t.Helper()
	var out []string
	for info, err := range blob.All(context.Background(), s, prefix) {
		if err != nil {
			t.Fatalf("All(%q): %v", prefix, err)
		}
		out = append(out, info.Key)
	}
	return out
}

// onlyReader hides every method but Read (no Seek, ReadAt, WriteTo).
type onlyReader struct{ r io.Reader }

func (o onlyReader) Read(p []byte) (int, error) { return o.r.Read(p) }

func testRoundTrip(t *testing.T, s blob.Store) {
	ctx := context.Background()
	cases := []struct {
		name  string
		n     int64
		known bool // pass the size, or -1
	}{
		{"0B", 0, true},
		{"0B-unknown", 0, false},
		{"4KiB", 4 * kib, true},
		{"4KiB-unknown", 4 * kib, false},
		{"12MiB-unknown", 12 * mib, false}, // several parts of unknown size
		{"64MiB", 64 * mib, true},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			key := "roundtrip/" + c.name
			size := int64(-1)
			if c.known {
				size = c.n
			}
			put(t, s, key, Payload(uint64(i), c.n), size)
			rc, err := s.Get(ctx, key)
			if err != nil {
				t.Fatalf("Get: %v", err)
			}
			sum, n := readHash(t, rc)
			if want := PayloadHash(uint64(i), c.n); n != c.n || sum != want {
				t.Fatalf("read back %d bytes (content equal: %v), want %d bytes", n, sum == want, c.n)
			}
			info, err := s.Stat(ctx, key)
			if err != nil || info.Size != c.n || info.Key != key {
				t.Fatalf("Stat = %+v, %v; want size %d", info, err, c.n)
			}
		})
	}
	t.Run("seekable-advanced", func(t *testing.T) {
		// A reader already partly consumed: only the rest is stored.
		data := PayloadBytes(99, 8*kib)
		r := bytes.NewReader(data)
		r.Seek(1000, io.SeekStart)
		put(t, s, "roundtrip/seekable", r, 4*kib)
		if got := GetBytes(t, s, "roundtrip/seekable"); !bytes.Equal(got, data[1000:1000+4*kib]) {
			t.Fatalf("stored %d bytes not equal to data[1000:5096]", len(got))
		}
		r.Seek(100, io.SeekStart)
		put(t, s, "roundtrip/seekable-unknown", r, -1)
		if got := GetBytes(t, s, "roundtrip/seekable-unknown"); !bytes.Equal(got, data[100:]) {
			t.Fatalf("stored %d bytes not equal to data[100:]", len(got))
		}
	})
	t.Run("reads-exactly-size", func(t *testing.T) {
		// Put with a size reads that many bytes and no more.
		r := strings.NewReader("0123456789")
		put(t, s, "roundtrip/exact", onlyReader{r}, 4)
		if got := string(GetBytes(t, s, "roundtrip/exact")); got != "0123" {
			t.Fatalf("stored %q, want %q", got, "0123")
		}
		if r.Len() != 6 {
			t.Fatalf("Put read %d bytes past the declared size", 6-r.Len())
		}
	})
}

func testStat(t *testing.T, s blob.Store) {
	ctx := context.Background()
	before := time.Now().Add(-2 * time.Minute) // tolerate clock skew and S3's second precision
	put(t, s, "stat/a", strings.NewReader("hello"), 5)
	info, err := s.Stat(ctx, "stat/a")
	if err != nil {
		t.Fatal(err)
	}
	if info.Key != "stat/a" || info.Size != 5 {
		t.Fatalf("Stat = %+v", info)
	}
	if info.ModTime.Before(before) || info.ModTime.After(time.Now().Add(2*time.Minute)) {
		t.Fatalf("ModTime %v is not about now", info.ModTime)
	}
	// A "directory" is not an object.
	put(t, s, "stat/dir/x", strings.NewReader("x"), 1)
	wantNotFound(t, s, "stat/dir")
}

func testRange(t *testing.T, s blob.Store) {
	ctx := context.Background()
	const size = 1*mib + 17
	data := PayloadBytes(7, size)
	put(t, s, "range/obj", bytes.NewReader(data), size)
	put(t, s, "range/empty", strings.NewReader(""), 0)

	read := func(key string, off, n int64) ([]byte, error) {
		rc, err := s.GetRange(ctx, key, off, n)
		if err != nil {
			return nil, err
		}
		defer rc.Close()
		return io.ReadAll(rc)
	}
	ok := []struct {
		name    string
		off, n  int64
		wantOff int64
		wantLen int64
	}{
		{"start", 0, 100, 0, 100},
		{"middle", 500_000, 4096, 500_000, 4096},
		{"end", size - 10, 10, size - 10, 10},
		{"past-end-short", size - 10, 100, size - 10, 10},
		{"to-end", 1000, -1, 1000, size - 1000},
		{"all", 0, -1, 0, size},
		{"zero-length", 10, 0, 10, 0},
		{"at-end", size, -1, size, 0},
		{"at-end-length", size, 5, size, 0},
	}
	for _, c := range ok {
		got, err := read("range/obj", c.off, c.n)
		if err != nil {
			t.Fatalf("%s: GetRange(%d, %d): %v", c.name, c.off, c.n, err)
		}
		if !bytes.Equal(got, data[c.wantOff:c.wantOff+c.wantLen]) {
			t.Fatalf("%s: GetRange(%d, %d) returned %d bytes, want data[%d:+%d]", c.name, c.off, c.n, len(got), c.wantOff, c.wantLen)
		}
	}
	if got, err := read("range/empty", 0, 10); err != nil || len(got) != 0 {
		t.Fatalf("empty object, GetRange(0, 10) = %d bytes, %v; want 0 bytes", len(got), err)
	}
	_, err := read("range/obj", size+1, 10)
	wantErr(t, err, blob.ErrInvalidRange, "offset past end")
	_, err = read("range/obj", size+1, 0)
	wantErr(t, err, blob.ErrInvalidRange, "offset past end, length 0")
	_, err = read("range/empty", 1, -1)
	wantErr(t, err, blob.ErrInvalidRange, "empty object, offset 1")
	_, err = read("range/obj", -1, 10)
	wantErr(t, err, blob.ErrInvalidArgument, "negative offset")
	_, err = read("range/obj", 0, -2)
	wantErr(t, err, blob.ErrInvalidArgument, "length -2")
	_, err = read("range/missing", 0, 10)
	wantErr(t, err, blob.ErrNotFound, "missing key")
}

// parallel runs fn(i) for i in [0, n) on 8 workers and fails on the first error.
func parallel(t *testing.T, n int, fn func(i int) error) {
	t.Helper()
	var (
		next atomic.Int64
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
	)
	for range 8 {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				if err := fn(i); err != nil {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
					return
				}
			}
		})
	}
	wg.Wait()
	if len(errs) > 0 {
		t.Fatal(errs[0])
	}
}

func testList(t *testing.T, s blob.Store) {
	ctx := context.Background()
	// 1,200 keys in 12 "directories", plus names whose order differs
	// between a naive directory walk and byte-wise key order.
	var want []string
	for i := range 1200 {
		want = append(want, fmt.Sprintf("list/d%02d/k%04d", i%12, i))
	}
	want = append(want, "list/x-1", "list/x.1", "list/x/1", "list/x/1/z", "list/x0", "list/x_1", "list/x~", "list/xé")
	// x/1 and x/1/z cannot both exist on fs; keep the deeper one.
	want = slices.DeleteFunc(want, func(k string) bool { return k == "list/x/1" })
	sizeOf := func(k string) int64 { return int64(len(k) % 7) }
	parallel(t, len(want), func(i int) error {
		k := want[i]
		return s.Put(ctx, k, Payload(uint64(i), sizeOf(k)), sizeOf(k))
	})
	put(t, s, "other/a", strings.NewReader("a"), 1)
	put(t, s, "lisu", strings.NewReader("a"), 1)
	slices.Sort(want)

	// Small pages.
	for _, limit := range []int{1, 7, 100} {
		var got []string
		after := ""
		for pages := 0; ; pages++ {
			if pages > len(want)+1 {
				t.Fatalf("limit %d: pagination does not end", limit)
			}
			page, err := s.List(ctx, "list/", after, limit)
			if err != nil {
				t.Fatalf("List(limit %d, after %q): %v", limit, after, err)
			}
			if len(page.Items) > limit {
				t.Fatalf("limit %d: page of %d", limit, len(page.Items))
			}
			for _, it := range page.Items {
				got = append(got, it.Key)
				if it.Size != sizeOf(it.Key) {
					t.Fatalf("%q: size %d, want %d", it.Key, it.Size, sizeOf(it.Key))
				}
			}
			if !page.Truncated {
				if page.Next != "" {
					t.Fatalf("last page has Next %q", page.Next)
				}
				break
			}
			if page.Next != page.Items[len(page.Items)-1].Key {
				t.Fatalf("Next %q is not the last key", page.Next)
			}
			after = page.Next
		}
		if !slices.Equal(got, want) {
			t.Fatalf("limit %d: listed %d keys, want %d; first difference at %d", limit, len(got), len(want), firstDiff(got, want))
		}
	}

	// Default and over-large limits are capped at 1,000.
	for _, limit := range []int{0, 5000} {
		page, err := s.List(ctx, "list/", "", limit)
		if err != nil {
			t.Fatal(err)
		}
		if len(page.Items) != blob.DefaultListLimit || !page.Truncated {
			t.Fatalf("limit %d: %d items, truncated %v; want %d, true", limit, len(page.Items), page.Truncated, blob.DefaultListLimit)
		}
	}

	// All walks every page.
	if got := keys(t, s, "list/"); !slices.Equal(got, want) {
		t.Fatalf("All: %d keys, want %d; first difference at %d", len(got), len(want), firstDiff(got, want))
	}

	// Prefix filtering, with whole and partial last segments.
	filter := func(p string) []string {
		var out []string
		for _, k := range append(slices.Clone(want), "lisu", "other/a") {
			if strings.HasPrefix(k, p) {
				out = append(out, k)
			}
		}
		slices.Sort(out)
		return out
	}
	for _, p := range []string{"", "list/d03/", "list/d0", "list/d03/k00", "list/x", "list/x/", "lis", "other/", "nothing/", "list/d99/", "list/d03/k0003"} {
		if got := keys(t, s, p); !slices.Equal(got, filter(p)) {
			t.Fatalf("prefix %q: got %d keys %v..., want %d", p, len(got), head(got), len(filter(p)))
		}
	}

	// startAfter: an existing key, a key that does not exist, and one
	// past a whole subtree.
	for _, after := range []string{want[500], "list/d05/k0005x", "list/d05/", "list/d05/~", "list/x", "list/zzz", "a"} {
		page, err := s.List(ctx, "list/", after, 50)
		if err != nil {
			t.Fatal(err)
		}
		var exp []string
		for _, k := range want {
			if k > after && len(exp) < 50 {
				exp = append(exp, k)
			}
		}
		var got []string
		for _, it := range page.Items {
			got = append(got, it.Key)
		}
		if !slices.Equal(got, exp) {
			t.Fatalf("startAfter %q: got %v..., want %v...", after, head(got), head(exp))
		}
	}

	// Bad prefixes are refused.
	for _, p := range []string{"/list", "list//", "../x", "list/../", "a\x00b"} {
		_, err := s.List(ctx, p, "", 10)
		wantErr(t, err, blob.ErrInvalidKey, fmt.Sprintf("List(prefix %q)", p))
	}
}

func head(s []string) []string { return s[:min(len(s), 5)] }

func firstDiff(a, b []string) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

func testOverwrite(t *testing.T, s blob.Store) {
	put(t, s, "ow/k", strings.NewReader("first version, longer"), -1)
	put(t, s, "ow/k", strings.NewReader("second"), 6)
	if got := string(GetBytes(t, s, "ow/k")); got != "second" {
		t.Fatalf("got %q after overwrite", got)
	}
	info, err := s.Stat(context.Background(), "ow/k")
	if err != nil || info.Size != 6 {
		t.Fatalf("Stat = %+v, %v", info, err)
	}
	if got := keys(t, s, "ow/"); !slices.Equal(got, []string{"ow/k"}) {
		t.Fatalf("List = %v", got)
	}
}

func testDelete(t *testing.T, s blob.Store) {
	ctx := context.Background()
	put(t, s, "del/a/b/c", strings.NewReader("x"), 1)
	put(t, s, "del/a/keep", strings.NewReader("y"), 1)
	if err := s.Delete(ctx, "del/a/b/c"); err != nil {
		t.Fatal(err)
	}
	wantNotFound(t, s, "del/a/b/c")
	_, err := s.Get(ctx, "del/a/b/c")
	wantErr(t, err, blob.ErrNotFound, "Get after Delete")
	if got := keys(t, s, "del/"); !slices.Equal(got, []string{"del/a/keep"}) {
		t.Fatalf("List after Delete = %v", got)
	}
	// Deleting what is not there succeeds (idempotent, as S3).
	for _, k := range []string{"del/a/b/c", "del/never", "del/a", "del/a/keep/deeper"} {
		if err := s.Delete(ctx, k); err != nil {
			t.Fatalf("Delete(%q) of a missing key: %v", k, err)
		}
	}
	if got := keys(t, s, "del/"); !slices.Equal(got, []string{"del/a/keep"}) {
		t.Fatalf("List after deleting missing keys = %v", got)
	}
	// The key can be written again, and so can a key where a deleted
	// subtree was.
	put(t, s, "del/a/b/c", strings.NewReader("again"), 5)
	if got := string(GetBytes(t, s, "del/a/b/c")); got != "again" {
		t.Fatalf("got %q", got)
	}
	for _, k := range []string{"del/a/b/c", "del/a/keep"} {
		if err := s.Delete(ctx, k); err != nil {
			t.Fatal(err)
		}
	}
	put(t, s, "del/a", strings.NewReader("now a leaf"), -1)
	if got := keys(t, s, "del/"); !slices.Equal(got, []string{"del/a"}) {
		t.Fatalf("List = %v", got)
	}
}

func testNotFound(t *testing.T, s blob.Store) {
	ctx := context.Background()
	const key = "missing/key"
	_, err := s.Get(ctx, key)
	wantErr(t, err, blob.ErrNotFound, "Get")
	if !strings.Contains(err.Error(), strconv.Quote(key)) {
		t.Fatalf("error %q does not name the key", err)
	}
	var be *blob.Error
	if !errors.As(err, &be) || be.Key != key || be.Op != "get" {
		t.Fatalf("error %#v is not a *blob.Error for get %q", err, key)
	}
	_, err = s.Stat(ctx, key)
	wantErr(t, err, blob.ErrNotFound, "Stat")
	_, err = s.GetRange(ctx, key, 0, 1)
	wantErr(t, err, blob.ErrNotFound, "GetRange")
	page, err := s.List(ctx, "missing/", "", 10)
	if err != nil || len(page.Items) != 0 || page.Truncated {
		t.Fatalf("List of an empty prefix = %+v, %v", page, err)
	}
}

// BadKeys are keys every backend must refuse.
var BadKeys = []string{
	"",
	"/abs",
	"/",
	"..",
	".",
	"../escape",
	"a/../../escape",
	"a/./b",
	"a//b",
	"a/",
	"a\x00b",
	"a\nb",
	"a\x7fb",
	"a\\b",
	"\xff\xfe",
	strings.Repeat("k", blob.MaxKeyLen+1),
	strings.Repeat("s", blob.MaxSegmentLen+1),
}

// countingReader counts Read calls.
type countingReader struct{ reads atomic.Int64 }

func (c *countingReader) Read(p []byte) (int, error) { c.reads.Add(1); return 0, io.EOF }

func testInvalidKeys(t *testing.T, s blob.Store) {
	ctx := context.Background()
	put(t, s, "ok/key", strings.NewReader("v"), 1)
	before := keys(t, s, "")
	for _, k := range BadKeys {
		src := &countingReader{}
		errs := map[string]error{
			"Put":    s.Put(ctx, k, src, 0),
			"Delete": s.Delete(ctx, k),
		}
		_, errs["Get"] = s.Get(ctx, k)
		_, errs["GetRange"] = s.GetRange(ctx, k, 0, 1)
		_, errs["Stat"] = s.Stat(ctx, k)
		for op, err := range errs {
			wantErr(t, err, blob.ErrInvalidKey, fmt.Sprintf("%s(%q)", op, k))
			if k != "" && len(k) < 100 && !strings.Contains(err.Error(), strconv.Quote(k)) {
				t.Fatalf("%s(%q): error %q does not quote the key", op, k, err)
			}
		}
		if src.reads.Load() != 0 {
			t.Fatalf("Put(%q) read the source before refusing the key", k)
		}
	}
	if after := keys(t, s, ""); !slices.Equal(before, after) {
		t.Fatalf("bad keys changed the store: before %v, after %v", before, after)
	}
	if got := string(GetBytes(t, s, "ok/key")); got != "v" {
		t.Fatalf("ok/key = %q", got)
	}
	err := s.Put(ctx, "ok/size", strings.NewReader(""), -2)
	wantErr(t, err, blob.ErrInvalidArgument, "Put with size -2")
	wantNotFound(t, s, "ok/size")
}

func testSizeMismatch(t *testing.T, s blob.Store) {
	ctx := context.Background()
	for _, src := range []struct {
		name string
		r    io.Reader
	}{
		{"stream", onlyReader{strings.NewReader("only 19 bytes here.")}},
		{"seekable", strings.NewReader("only 19 bytes here.")},
	} {
		err := s.Put(ctx, "size/"+src.name, src.r, 100)
		wantErr(t, err, blob.ErrSizeMismatch, src.name+": Put of 19 bytes declared as 100")
		wantNotFound(t, s, "size/"+src.name)
	}
	// Large and short: crosses the multipart threshold before ending.
	err := s.Put(ctx, "size/large", Payload(1, 7*mib), 12*mib)
	wantErr(t, err, blob.ErrSizeMismatch, "Put of 7 MiB declared as 12 MiB")
	wantNotFound(t, s, "size/large")
}

// testConcurrentWriters races 8 writers of distinct payloads on one key
// while readers read it: every read returns one whole payload.
func testConcurrentWriters(t *testing.T, s blob.Store) {
	ctx := context.Background()
	const (
		writers = 8
		size    = 6 * mib // above the 5 MiB part size: multipart on s3
		key     = "race/key"
	)
	valid := map[[32]byte]uint64{}
	for w := range writers {
		valid[PayloadHash(uint64(1000+w), size)] = uint64(w)
	}
	var (
		wg      sync.WaitGroup
		done    atomic.Bool
		reads   atomic.Int64
		readErr = make(chan error, 4)
	)
	for range 2 {
		wg.Go(func() {
			for !done.Load() {
				rc, err := s.Get(ctx, key)
				if errors.Is(err, blob.ErrNotFound) {
					continue
				}
				if err != nil {
					readErr <- err
					return
				}
				h := sha256.New()
				n, err := io.Copy(h, rc)
				rc.Close()
				if err != nil {
					readErr <- err
					return
				}
				if _, ok := valid[[32]byte(h.Sum(nil))]; !ok {
					readErr <- fmt.Errorf("read a torn object of %d bytes", n)
					return
				}
				reads.Add(1)
			}
		})
	}
	var wwg sync.WaitGroup
	errs := make(chan error, writers)
	for w := range writers {
		wwg.Go(func() {
			if err := s.Put(ctx, key, Payload(uint64(1000+w), size), size); err != nil {
				errs <- err
			}
		})
	}
	wwg.Wait()
	done.Store(true)
	wg.Wait()
	close(errs)
	close(readErr)
	for err := range errs {
		t.Fatalf("writer: %v", err)
	}
	for err := range readErr {
		t.Fatalf("reader: %v", err)
	}
	rc, err := s.Get(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	sum, n := readHash(t, rc)
	w, ok := valid[sum]
	if !ok || n != size {
		t.Fatalf("final object (%d bytes) is none of the written payloads", n)
	}
	t.Logf("final object is writer %d's; %d concurrent reads saw whole payloads", w, reads.Load())
	if got := keys(t, s, "race/"); !slices.Equal(got, []string{key}) {
		t.Fatalf("List = %v", got)
	}
}

// testPutDeleteRace races Puts and Deletes of neighbouring keys (on fs,
// Delete removes directories it leaves empty, which a Put may be about to
// use): every Put succeeds and its object reads back until deleted.
func testPutDeleteRace(t *testing.T, s blob.Store) {
	ctx := context.Background()
	const workers, rounds = 3, 40
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Go(func() {
			for i := range rounds {
				key := fmt.Sprintf("pd/a/b/w%d", w)
				val := fmt.Sprintf("%d-%d", w, i)
				if err := s.Put(ctx, key, strings.NewReader(val), int64(len(val))); err != nil {
					errs <- fmt.Errorf("round %d: %w", i, err)
					return
				}
				rc, err := s.Get(ctx, key)
				if err != nil {
					errs <- fmt.Errorf("round %d: %w", i, err)
					return
				}
				got, err := io.ReadAll(rc)
				rc.Close()
				if err != nil || string(got) != val {
					errs <- fmt.Errorf("round %d: read %q, %v; want %q", i, got, err, val)
					return
				}
				if err := s.Delete(ctx, key); err != nil {
					errs <- fmt.Errorf("round %d: %w", i, err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if got := keys(t, s, "pd/"); len(got) != 0 {
		t.Fatalf("List after the race = %v", got)
	}
}

// FaultReader returns r's bytes until n have been read, then err.
type FaultReader struct {
	R   io.Reader
	N   int64
	Err error
}

// Read implements io.Reader.
func (f *FaultReader) Read(p []byte) (int, error) {
	if f.N <= 0 {
		return 0, f.Err
	}
	if int64(len(p)) > f.N {
		p = p[:f.N]
	}
	n, err := f.R.Read(p)
	f.N -= int64(n)
	return n, err
}

// ErrInjected is the error FaultReader returns in the suite.
var ErrInjected = errors.New("injected read failure")

func testFaultMidStream(t *testing.T, s blob.Store) {
	ctx := context.Background()
	old := PayloadBytes(5, 3*kib)
	put(t, s, "fault/existing", bytes.NewReader(old), int64(len(old)))
	for _, c := range []struct {
		name      string
		total, at int64
		size      int64
	}{
		{"small-known", 1 * mib, 100 * kib, 1 * mib},
		{"small-unknown", 1 * mib, 100 * kib, -1},
		{"large-known", 20 * mib, 12 * mib, 20 * mib}, // fails after two 5 MiB parts
		{"large-unknown", 20 * mib, 12 * mib, -1},
	} {
		for _, key := range []string{"fault/new-" + c.name, "fault/existing"} {
			r := &FaultReader{R: Payload(6, c.total), N: c.at, Err: ErrInjected}
			err := s.Put(ctx, key, r, c.size)
			if !errors.Is(err, ErrInjected) {
				t.Fatalf("%s: Put(%q) = %v, want the reader's error", c.name, key, err)
			}
		}
		wantNotFound(t, s, "fault/new-"+c.name)
		if got := GetBytes(t, s, "fault/existing"); !bytes.Equal(got, old) {
			t.Fatalf("%s: a failed overwrite changed the object (%d bytes)", c.name, len(got))
		}
	}
	if got := keys(t, s, "fault/"); !slices.Equal(got, []string{"fault/existing"}) {
		t.Fatalf("List after failed Puts = %v", got)
	}
}

// cancelReader cancels a context after n bytes and then keeps reading.
type cancelReader struct {
	r      io.Reader
	n      int64
	cancel context.CancelFunc
}

func (c *cancelReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n -= int64(n)
	if c.n <= 0 {
		c.cancel()
	}
	return n, err
}

func testContextCanceled(t *testing.T, s blob.Store) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err := s.Put(ctx, "ctx/before", strings.NewReader("x"), 1)
	wantErr(t, err, context.Canceled, "Put with a cancelled context")
	wantNotFound(t, s, "ctx/before")

	for _, size := range []int64{8 * mib, -1} {
		ctx, cancel := context.WithCancel(context.Background())
		r := &cancelReader{r: Payload(8, 8*mib), n: 2 * mib, cancel: cancel}
		err = s.Put(ctx, "ctx/during", r, size)
		cancel()
		wantErr(t, err, context.Canceled, fmt.Sprintf("Put (size %d) cancelled mid-stream", size))
		wantNotFound(t, s, "ctx/during")
	}
}

// countingStore counts Puts.
type countingStore struct {
	blob.Store
	puts atomic.Int64
}

func (c *countingStore) Put(ctx context.Context, key string, r io.Reader, size int64) error {
	c.puts.Add(1)
	return c.Store.Put(ctx, key, r, size)
}

func testModules(t *testing.T, s blob.Store) {
	ctx := context.Background()
	cs := &countingStore{Store: s}
	for _, size := range []int64{100 * kib, 6 * mib} { // in memory, and spooled to a file
		data := PayloadBytes(uint64(size), size)
		digest, n, err := blob.PutModule(ctx, cs, "acme", bytes.NewReader(data))
		if err != nil {
			t.Fatal(err)
		}
		if digest != blob.Digest(data) || n != size {
			t.Fatalf("PutModule = %s, %d; want %s, %d", digest, n, blob.Digest(data), size)
		}
		tk, _ := blob.ForTenant("acme")
		key, _ := tk.Module(digest)
		if info, err := s.Stat(ctx, key); err != nil || info.Size != size {
			t.Fatalf("Stat(%q) = %+v, %v", key, info, err)
		}
		// Dedup: the same bytes again, through a stream, write nothing.
		puts := cs.puts.Load()
		digest2, _, err := blob.PutModule(ctx, cs, "acme", onlyReader{bytes.NewReader(data)})
		if err != nil || digest2 != digest {
			t.Fatalf("second PutModule = %s, %v", digest2, err)
		}
		if cs.puts.Load() != puts {
			t.Fatalf("second PutModule of the same bytes wrote again")
		}
		rc, err := blob.GetModule(ctx, s, "acme", digest)
		if err != nil {
			t.Fatal(err)
		}
		got, err := io.ReadAll(rc)
		rc.Close()
		if err != nil || !bytes.Equal(got, data) {
			t.Fatalf("GetModule read %d bytes, %v", len(got), err)
		}
	}

	data := PayloadBytes(42, 64*kib)
	digest, _, err := blob.PutModule(ctx, s, "acme", bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	tk, _ := blob.ForTenant("acme")
	key, _ := tk.Module(digest)

	// Corrupt the object with a raw Put: same size, one byte flipped.
	bad := slices.Clone(data)
	bad[len(bad)/2] ^= 0x40
	put(t, s, key, bytes.NewReader(bad), int64(len(bad)))
	rc, err := blob.GetModule(ctx, s, "acme", digest)
	if err != nil {
		t.Fatal(err)
	}
	_, err = io.ReadAll(rc)
	rc.Close()
	wantErr(t, err, blob.ErrDigestMismatch, "reading a corrupted module")
	if !strings.Contains(err.Error(), key) {
		t.Fatalf("digest error %q does not name the key", err)
	}
	// Truncated: a different size. PutModule notices and rewrites it.
	put(t, s, key, bytes.NewReader(data[:100]), 100)
	rc, _ = blob.GetModule(ctx, s, "acme", digest)
	_, err = io.ReadAll(rc)
	rc.Close()
	wantErr(t, err, blob.ErrDigestMismatch, "reading a truncated module")
	if _, _, err := blob.PutModule(ctx, s, "acme", bytes.NewReader(data)); err != nil {
		t.Fatal(err)
	}
	rc, _ = blob.GetModule(ctx, s, "acme", digest)
	if _, err := io.ReadAll(rc); err != nil {
		t.Fatalf("after re-upload: %v", err)
	}
	rc.Close()

	// Tenants are separate.
	_, err = blob.GetModule(ctx, s, "other", digest)
	wantErr(t, err, blob.ErrNotFound, "GetModule of another tenant")

	// Bad input.
	for _, d := range []string{"", "sha256-", "sha256-" + strings.Repeat("A", 64), "md5-" + strings.Repeat("a", 64), "sha256-" + strings.Repeat("a", 63), digest + ".wasm", "sha256-../../x"} {
		_, err := blob.GetModule(ctx, s, "acme", d)
		wantErr(t, err, blob.ErrInvalidKey, fmt.Sprintf("GetModule(digest %q)", d))
	}
	for _, tn := range []string{"", "Acme", "../x", "a/b", "-a", strings.Repeat("a", 64)} {
		_, err := blob.GetModule(ctx, s, tn, digest)
		wantErr(t, err, blob.ErrInvalidKey, fmt.Sprintf("GetModule(tenant %q)", tn))
		_, _, err = blob.PutModule(ctx, s, tn, strings.NewReader("x"))
		wantErr(t, err, blob.ErrInvalidKey, fmt.Sprintf("PutModule(tenant %q)", tn))
	}
	_, _, err = blob.PutModule(ctx, s, "acme", strings.NewReader(""))
	wantErr(t, err, blob.ErrInvalidArgument, "PutModule of an empty module")
	_, _, err = blob.PutModule(ctx, s, "acme", &FaultReader{R: Payload(1, mib), N: 1000, Err: ErrInjected})
	wantErr(t, err, ErrInjected, "PutModule with a failing reader")
	if got := keys(t, s, "tenants/acme/modules/"); len(got) != 3 {
		t.Fatalf("modules = %v, want 3", got)
	}
}

func testClosed(t *testing.T, s blob.Store) {
	ctx := context.Background()
	put(t, s, "closed/k", strings.NewReader("v"), 1)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	err := s.Put(ctx, "closed/k", strings.NewReader("v"), 1)
	wantErr(t, err, blob.ErrClosed, "Put after Close")
	_, err = s.Get(ctx, "closed/k")
	wantErr(t, err, blob.ErrClosed, "Get after Close")
	_, err = s.GetRange(ctx, "closed/k", 0, 1)
	wantErr(t, err, blob.ErrClosed, "GetRange after Close")
	_, err = s.Stat(ctx, "closed/k")
	wantErr(t, err, blob.ErrClosed, "Stat after Close")
	_, err = s.List(ctx, "", "", 0)
	wantErr(t, err, blob.ErrClosed, "List after Close")
	err = s.Delete(ctx, "closed/k")
	wantErr(t, err, blob.ErrClosed, "Delete after Close")
	if err := s.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
}
