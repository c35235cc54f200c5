package blob_test

import (
	"errors"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/sluicehq/sluice/blob"
	"github.com/sluicehq/sluice/blob/blobtest"
)

func TestValidateKey(t *testing.T) {
	good := []string{
		"a",
		"tenants/acme/modules/sha256-00.wasm",
		"a/b/c",
		"with space/and-dash_under.score~tilde",
		"...",       // only "." and ".." are special
		"a/.hidden", // dot files are fine
		"ünïcödé/日本語",
		strings.Repeat("k/", blob.MaxKeyLen/2-1) + "kk", // exactly 1024 bytes
		strings.Repeat("s", blob.MaxSegmentLen) + "/x",
	}
	for _, k := range good {
		if err := blob.ValidateKey(k); err != nil {
			t.Errorf("ValidateKey(%q) = %v, want nil", k, err)
		}
	}
	rules := map[string]string{
		"":                                    "empty",
		"/abs":                                "starts with '/'",
		"a/":                                  "ends with '/'",
		"a//b":                                "empty segment",
		"..":                                  `".." segment`,
		"a/../b":                              `".." segment`,
		"./a":                                 `"." segment`,
		"a\x00b":                              "NUL",
		"a\tb":                                "control character U+0009",
		"a\u0085b":                            "control character U+0085",
		"a\\b":                                "backslash",
		"\xffx":                               "UTF-8",
		strings.Repeat("k", blob.MaxKeyLen+1): "1025 bytes long; the limit is 1024",
		strings.Repeat("s", blob.MaxSegmentLen+1): "segment of 256 bytes",
	}
	for k, rule := range rules {
		err := blob.ValidateKey(k)
		if !errors.Is(err, blob.ErrInvalidKey) {
			t.Errorf("ValidateKey(%q) = %v, want ErrInvalidKey", k, err)
			continue
		}
		if !strings.Contains(err.Error(), rule) || !strings.Contains(err.Error(), strconv.Quote(k)) {
			t.Errorf("ValidateKey(%q) = %q; want the quoted key and %q", k, err, rule)
		}
	}
	for _, k := range blobtest.BadKeys {
		if blob.ValidateKey(k) == nil {
			t.Errorf("blobtest.BadKeys has %q, which ValidateKey accepts", k)
		}
	}
}

// FuzzValidateKey checks the validator's promises on arbitrary input: it
// never panics, and a key it accepts is a canonical relative path that stays
// inside any directory it is joined to.
func FuzzValidateKey(f *testing.F) {
	for _, k := range append([]string{
		"a", "a/b", "tenants/acme/modules/sha256-ab.wasm", "...", "a/.b", "a/b..", "..a", "ü/x",
		"C:\\x", "a/./b", "//", "a/b/", "%2e%2e/x", "\u202e", "a\u2028b",
	}, blobtest.BadKeys...) {
		f.Add(k)
	}
	const root = "/srv/sluice/objects"
	f.Fuzz(func(t *testing.T, key string) {
		err := blob.ValidateKey(key)
		if err != nil {
			if !errors.Is(err, blob.ErrInvalidKey) {
				t.Fatalf("ValidateKey(%q) = %v, not ErrInvalidKey", key, err)
			}
			return
		}
		if len(key) == 0 || len(key) > blob.MaxKeyLen || !utf8.ValidString(key) {
			t.Fatalf("accepted %q: bad length or UTF-8", key)
		}
		if !filepath.IsLocal(key) || filepath.Clean(key) != key {
			t.Fatalf("accepted %q, which is not a canonical local path", key)
		}
		joined := filepath.Join(root, key)
		if !strings.HasPrefix(joined, root+"/") {
			t.Fatalf("accepted %q, which escapes the root: %s", key, joined)
		}
		if rel, err := filepath.Rel(root, joined); err != nil || rel != key {
			t.Fatalf("accepted %q: Rel = %q, %v", key, rel, err)
		}
		for seg := range strings.SplitSeq(key, "/") {
			if seg == "" || seg == "." || seg == ".." || len(seg) > blob.MaxSegmentLen {
				t.Fatalf("accepted %q with segment %q", key, seg)
			}
		}
		if strings.ContainsAny(key, "\x00\\") {
			t.Fatalf("accepted %q with NUL or backslash", key)
		}
		// A valid key is a valid key prefix for Join, and round-trips.
		if got, err := blob.Join("", key); err != nil || got != key {
			t.Fatalf("Join(\"\", %q) = %q, %v", key, got, err)
		}
	})
}
