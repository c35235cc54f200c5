package blob_test

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"

	"github.com/sluicehq/sluice/blob"
	"github.com/sluicehq/sluice/blob/blobtest"
	"github.com/sluicehq/sluice/internal/testutil"
)

// The benchmarks time the blob.Store operation and its native baseline in
// the same iterations (alternating which goes first), and report:
//
//	ns/op           the Store operation alone
//	<base>-ns/op    the baseline alone
//	x-of-<base>     baseline time / Store time: the Store's throughput as a
//	                fraction of the baseline's (1.0 = as fast; target >= 0.9)
//
// Run: go test -run '^$' -bench . -benchtime 2s ./blob/
// (the S3 ones need MinIO: go run ./internal/check prints how to get one,
// or set SLUICE_TEST_S3_* by hand).

var benchSizes = []struct {
	name string
	n    int
}{{"4KiB", 4 << 10}, {"8MiB", 8 << 20}}

// pair times fns[i] for each iteration and reports per-op times and ratios
// of every baseline (fns[1:]) against the subject (fns[0]).
func pair(b *testing.B, size int, names []string, fns ...func(i int)) {
	b.Helper()
	total := make([]time.Duration, len(fns))
	iters := 0
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		iters++
		for j := range fns {
			k := (j + i) % len(fns) // rotate the order
			start := time.Now()
			fns[k](i)
			total[k] += time.Since(start)
		}
	}
	b.StopTimer()
	n := float64(iters)
	b.ReportMetric(float64(total[0].Nanoseconds())/n, "ns/op")
	b.ReportMetric(float64(size)*n/total[0].Seconds()/1e6, "MB/s")
	for k := 1; k < len(fns); k++ {
		b.ReportMetric(float64(total[k].Nanoseconds())/n, names[k]+"-ns/op")
		b.ReportMetric(total[k].Seconds()/total[0].Seconds(), "x-of-"+names[k])
	}
}

func fatalIf(b *testing.B, err error) {
	if err != nil {
		b.Fatal(err)
	}
}

// BenchmarkFSPut compares Store.Put (temp file, fsync, rename, fsync dir)
// with os.WriteFile (no fsync: not crash-safe, so not a fair target) and
// with the same durable sequence written by hand ("durable").
func BenchmarkFSPut(b *testing.B) {
	ctx := context.Background()
	for _, sz := range benchSizes {
		b.Run(sz.name, func(b *testing.B) {
			dir := b.TempDir()
			s, err := blob.OpenFS(ctx, blob.FSOptions{Dir: filepath.Join(dir, "store")})
			fatalIf(b, err)
			defer s.Close()
			raw := filepath.Join(dir, "raw")
			fatalIf(b, os.MkdirAll(raw, 0o755))
			data := blobtest.PayloadBytes(1, int64(sz.n))
			pair(b, sz.n, []string{"blob", "writefile", "durable"},
				func(int) { fatalIf(b, s.Put(ctx, "bench/obj", bytes.NewReader(data), int64(len(data)))) },
				func(int) { fatalIf(b, os.WriteFile(filepath.Join(raw, "obj"), data, 0o644)) },
				func(int) { fatalIf(b, durableWrite(raw, "obj2", data)) },
			)
		})
	}
}

// durableWrite is the hand-written crash-safe write the fs backend does.
func durableWrite(dir, name string, data []byte) error {
	f, err := os.CreateTemp(dir, "tmp-")
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		return err
	}
	if err := f.Sync(); err != nil {
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(f.Name(), filepath.Join(dir, name)); err != nil {
		return err
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// BenchmarkFSGet compares Store.Get read into a buffer of the object's size
// with os.ReadFile (which also sizes its buffer from a stat).
func BenchmarkFSGet(b *testing.B) {
	ctx := context.Background()
	for _, sz := range benchSizes {
		b.Run(sz.name, func(b *testing.B) {
			dir := b.TempDir()
			s, err := blob.OpenFS(ctx, blob.FSOptions{Dir: filepath.Join(dir, "store")})
			fatalIf(b, err)
			defer s.Close()
			data := blobtest.PayloadBytes(1, int64(sz.n))
			fatalIf(b, s.Put(ctx, "bench/dir/obj", bytes.NewReader(data), int64(len(data))))
			raw := filepath.Join(dir, "raw", "bench", "dir")
			fatalIf(b, os.MkdirAll(raw, 0o755))
			fatalIf(b, os.WriteFile(filepath.Join(raw, "obj"), data, 0o644))
			pair(b, sz.n, []string{"blob", "readfile"},
				func(int) {
					rc, err := s.Get(ctx, "bench/dir/obj")
					fatalIf(b, err)
					buf := make([]byte, sz.n)
					_, err = io.ReadFull(rc, buf)
					fatalIf(b, err)
					rc.Close()
				},
				func(int) {
					_, err := os.ReadFile(filepath.Join(raw, "obj"))
					fatalIf(b, err)
				},
			)
		})
	}
}

// s3Bench opens a store (default part size, as in production) and a raw
// minio-go client on the same MinIO and bucket.
func s3Bench(b *testing.B) (blob.Store, *minio.Client, string) {
	srv := testutil.RequireS3(b)
	o := s3Options(b, srv.Endpoint, srv.AccessKey, srv.SecretKey)
	o.PartSize = 0
	s := openS3(b, o)
	b.Logf("MinIO at %s, bucket %s", srv.Endpoint, o.Bucket)
	return s, rawClient(b, srv.Endpoint, srv.AccessKey, srv.SecretKey), o.Bucket
}

// BenchmarkS3Put compares Store.Put with minio-go's PutObject, both given a
// bytes.Reader of the whole object.
func BenchmarkS3Put(b *testing.B) {
	ctx := context.Background()
	for _, sz := range benchSizes {
		b.Run(sz.name, func(b *testing.B) {
			s, raw, bucket := s3Bench(b)
			data := blobtest.PayloadBytes(1, int64(sz.n))
			pair(b, sz.n, []string{"blob", "minio"},
				func(int) { fatalIf(b, s.Put(ctx, "bench/obj", bytes.NewReader(data), int64(len(data)))) },
				func(int) {
					_, err := raw.PutObject(ctx, bucket, "raw/obj", bytes.NewReader(data), int64(len(data)), minio.PutObjectOptions{})
					fatalIf(b, err)
				},
			)
		})
	}
}

// BenchmarkS3Get compares Store.Get with minio-go's GetObject, both read
// into a buffer of the object's size.
func BenchmarkS3Get(b *testing.B) {
	ctx := context.Background()
	for _, sz := range benchSizes {
		b.Run(sz.name, func(b *testing.B) {
			s, raw, bucket := s3Bench(b)
			data := blobtest.PayloadBytes(1, int64(sz.n))
			fatalIf(b, s.Put(ctx, "bench/obj", bytes.NewReader(data), int64(len(data))))
			_, err := raw.PutObject(ctx, bucket, "raw/obj", bytes.NewReader(data), int64(len(data)), minio.PutObjectOptions{})
			fatalIf(b, err)
			buf := make([]byte, sz.n)
			pair(b, sz.n, []string{"blob", "minio"},
				func(int) {
					rc, err := s.Get(ctx, "bench/obj")
					fatalIf(b, err)
					_, err = io.ReadFull(rc, buf)
					fatalIf(b, err)
					rc.Close()
				},
				func(int) {
					obj, err := raw.GetObject(ctx, bucket, "raw/obj", minio.GetObjectOptions{})
					fatalIf(b, err)
					_, err = io.ReadFull(obj, buf)
					fatalIf(b, err)
					obj.Close()
				},
			)
		})
	}
}

// BenchmarkS3PutStream: a reader of unknown size (a network stream, say),
// Store.Put(size -1) against minio-go's PutObject(size -1) with the same
// 16 MiB part size (minio-go's own default for unknown sizes is a ~537 MiB
// part buffer).
func BenchmarkS3PutStream(b *testing.B) {
	ctx := context.Background()
	for _, sz := range benchSizes {
		b.Run(sz.name, func(b *testing.B) {
			s, raw, bucket := s3Bench(b)
			data := blobtest.PayloadBytes(1, int64(sz.n))
			pair(b, sz.n, []string{"blob", "minio"},
				func(int) { fatalIf(b, s.Put(ctx, "bench/obj", onlyReader{bytes.NewReader(data)}, -1)) },
				func(int) {
					_, err := raw.PutObject(ctx, bucket, "raw/obj", onlyReader{bytes.NewReader(data)}, -1, minio.PutObjectOptions{PartSize: blob.DefaultPartSize})
					fatalIf(b, err)
				},
			)
		})
	}
}

type onlyReader struct{ r io.Reader }

func (o onlyReader) Read(p []byte) (int, error) { return o.r.Read(p) }
