package blob_test

import (
	"context"
	"errors"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/blob"
)

func TestParseURL(t *testing.T) {
	good := []struct {
		url  string
		want blob.Target
		str  string // canonical form; "" means the same as url
	}{
		{"file:///var/lib/sluice", blob.Target{FS: &blob.FSOptions{Dir: "/var/lib/sluice"}}, ""},
		{"file://localhost/var/lib/sluice/", blob.Target{FS: &blob.FSOptions{Dir: "/var/lib/sluice"}}, "file:///var/lib/sluice"},
		{"file:///a/../b", blob.Target{FS: &blob.FSOptions{Dir: "/b"}}, "file:///b"},
		{"file:///with%20space", blob.Target{FS: &blob.FSOptions{Dir: "/with space"}}, ""},
		{"s3://my-bucket", blob.Target{S3: &blob.S3Options{Bucket: "my-bucket"}}, ""},
		{"s3://my-bucket/", blob.Target{S3: &blob.S3Options{Bucket: "my-bucket"}}, "s3://my-bucket"},
		{"s3://my-bucket/a/b/", blob.Target{S3: &blob.S3Options{Bucket: "my-bucket", Prefix: "a/b"}}, "s3://my-bucket/a/b"},
		{
			"s3://b.example/p?endpoint=127.0.0.1:9000&secure=false&region=us-east-1&create_bucket=true&part_size=8388608&dial_timeout=2s&call_timeout=500ms&io_timeout=1m&max_retries=3",
			blob.Target{S3: &blob.S3Options{
				Bucket: "b.example", Prefix: "p", Endpoint: "127.0.0.1:9000", Insecure: true, Region: "us-east-1",
				CreateBucket: true, PartSize: 8 << 20, DialTimeout: 2 * time.Second, CallTimeout: 500 * time.Millisecond,
				IOTimeout: time.Minute, MaxRetries: 3,
			}},
			"s3://b.example/p?endpoint=127.0.0.1:9000&region=us-east-1&secure=false&create_bucket=true&part_size=8388608&dial_timeout=2s&call_timeout=500ms&io_timeout=1m0s&max_retries=3",
		},
		{"s3://bkt?endpoint=minio.internal&secure=true&create_bucket=false", blob.Target{S3: &blob.S3Options{Bucket: "bkt", Endpoint: "minio.internal"}}, "s3://bkt?endpoint=minio.internal"},
		{"s3://bkt?endpoint=[::1]:9000", blob.Target{S3: &blob.S3Options{Bucket: "bkt", Endpoint: "[::1]:9000"}}, "s3://bkt?endpoint=%5B::1%5D:9000"},
	}
	for _, c := range good {
		got, err := blob.ParseURL(c.url)
		if err != nil {
			t.Errorf("ParseURL(%q): %v", c.url, err)
			continue
		}
		if !reflect.DeepEqual(got, c.want) {
			t.Errorf("ParseURL(%q) = %+v / %+v, want %+v / %+v", c.url, got.FS, got.S3, c.want.FS, c.want.S3)
		}
		str := c.str
		if str == "" {
			str = c.url
		}
		if got.String() != str {
			t.Errorf("ParseURL(%q).String() = %q, want %q", c.url, got.String(), str)
		}
	}

	bad := map[string]string{
		"":                                     "missing scheme",
		"/abs/dir":                             "missing scheme",
		"relative/dir":                         "missing scheme",
		"http://host/bucket":                   `unknown scheme "http"`,
		"gs://bucket":                          `unknown scheme "gs"`,
		"file:relative/dir":                    "absolute path",
		"file://relative/dir":                  "three slashes",
		"file://":                              "absolute path",
		"file:///dir?x=1":                      "no parameters",
		"file:///dir#frag":                     "fragment",
		"file:///a%00b":                        "control character",
		"s3://":                                "missing bucket",
		"s3:///prefix":                         "missing bucket",
		"s3:bucket":                            "missing bucket",
		"s3://Bucket":                          "bucket",
		"s3://b":                               "bucket",
		"s3://bucket:9000":                     "bucket",
		"s3://user:pass@bucket":                "credentials in the URL",
		"s3://bucket//a":                       "starts with",
		"s3://bucket/a//b":                     "empty segment",
		"s3://bucket/a/../b":                   `".." segment`,
		"s3://bucket?endpoint=http://h:9":      "endpoint",
		"s3://bucket?endpoint=h:0":             "endpoint",
		"s3://bucket?endpoint=h:99999":         "endpoint",
		"s3://bucket?endpoint=h/p":             "endpoint",
		"s3://bucket?endpoint=":                "non-empty value",
		"s3://bucket?secure=maybe":             "secure",
		"s3://bucket?secure=true&secure=false": "exactly one",
		"s3://bucket?part_size=1024":           "5 MiB",
		"s3://bucket?part_size=lots":           "part_size",
		"s3://bucket?dial_timeout=5":           "dial_timeout",
		"s3://bucket?call_timeout=-1s":         "above 0",
		"s3://bucket?max_retries=0":            "1 to 20",
		"s3://bucket?region=us east":           "region",
		"s3://bucket?endpint=h:9000":           `unknown parameter "endpint"`,
		"s3://bucket?%zz":                      "bad query",
		"s3://bucket?a=1;b=2":                  "bad query",
		"s3://bucket\x00":                      "control character",
	}
	for u, want := range bad {
		_, err := blob.ParseURL(u)
		if !errors.Is(err, blob.ErrInvalidURL) {
			t.Errorf("ParseURL(%q) = %v, want ErrInvalidURL", u, err)
			continue
		}
		if !strings.Contains(err.Error(), want) {
			t.Errorf("ParseURL(%q) = %q, want it to mention %q", u, err, want)
		}
	}
}

// Open refuses a bad URL before touching disk or network.
func TestOpenBadURL(t *testing.T) {
	dir := t.TempDir()
	for _, u := range []string{"file://" + dir + "/x?mode=fast", "file:" + dir[1:], "s3://bucket?endpoint=nowhere:1&bogus=1"} {
		start := time.Now()
		if _, err := blob.Open(context.Background(), u); !errors.Is(err, blob.ErrInvalidURL) {
			t.Fatalf("Open(%q) = %v, want ErrInvalidURL", u, err)
		}
		if time.Since(start) > time.Second {
			t.Fatalf("Open(%q) took %v", u, time.Since(start))
		}
	}
	if ents, _ := filepath.Glob(filepath.Join(dir, "*")); len(ents) != 0 {
		t.Fatalf("a refused URL created %v", ents)
	}
	s, err := blob.Open(context.Background(), "file://"+dir+"/store")
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
}

// FuzzParseURL: ParseURL never panics, fails only with ErrInvalidURL, and a
// URL it accepts is well-formed and round-trips through Target.String.
func FuzzParseURL(f *testing.F) {
	for _, s := range []string{
		"file:///var/lib/sluice", "file://localhost/x/", "file:///a/../b", "file:///%41", "file://x/y", "file:rel",
		"s3://bucket", "s3://bucket/a/b/", "s3://bucket/a%2Fb", "s3://b.example/p?endpoint=127.0.0.1:9000&secure=false",
		"s3://bkt?endpoint=[::1]:9000&region=eu-west-1&create_bucket=true&part_size=5242880",
		"s3://bkt?dial_timeout=1s&call_timeout=2s&io_timeout=3s&max_retries=5",
		"s3://user:pw@bucket", "s3://bucket#x", "s3://bucket?%zz", "s3://Bucket", "", "::", "s3://bucket/..",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		tg, err := blob.ParseURL(raw)
		if err != nil {
			if !errors.Is(err, blob.ErrInvalidURL) {
				t.Fatalf("ParseURL(%q) = %v, not ErrInvalidURL", raw, err)
			}
			return
		}
		if (tg.FS == nil) == (tg.S3 == nil) {
			t.Fatalf("ParseURL(%q) set %v FS and %v S3", raw, tg.FS != nil, tg.S3 != nil)
		}
		if tg.FS != nil && (!filepath.IsAbs(tg.FS.Dir) || filepath.Clean(tg.FS.Dir) != tg.FS.Dir) {
			t.Fatalf("ParseURL(%q): dir %q is not absolute and clean", raw, tg.FS.Dir)
		}
		if tg.S3 != nil {
			if tg.S3.Bucket == "" || tg.S3.AccessKey != "" || tg.S3.SecretKey != "" {
				t.Fatalf("ParseURL(%q) = %+v", raw, tg.S3)
			}
			if p := tg.S3.Prefix; p != "" && blob.ValidateKey(p) != nil {
				t.Fatalf("ParseURL(%q): prefix %q is not a valid key", raw, p)
			}
		}
		canon := tg.String()
		again, err := blob.ParseURL(canon)
		if err != nil {
			t.Fatalf("ParseURL(%q) ok, but its String %q does not parse: %v", raw, canon, err)
		}
		if !reflect.DeepEqual(again, tg) {
			t.Fatalf("round trip of %q via %q: %+v/%+v != %+v/%+v", raw, canon, again.FS, again.S3, tg.FS, tg.S3)
		}
		if again.String() != canon {
			t.Fatalf("String is not stable: %q then %q", canon, again.String())
		}
	})
}
