package blob

import (
	"context"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

const (
	// MaxKeyLen is the longest key in bytes: S3's limit, which every
	// backend enforces so a key valid on one is valid on all.
	MaxKeyLen = 1024
	// MaxSegmentLen is the longest '/'-separated key segment in bytes:
	// the file-name limit of common file systems (NAME_MAX), enforced on
	// every backend for the same reason.
	MaxSegmentLen = 255
)

// ValidateKey reports whether key is a valid object key. Both backends use
// it, so the same keys are valid everywhere.
//
// A key is a relative, '/'-separated path of UTF-8 text: at most MaxKeyLen
// bytes; no empty, "." or ".." segment (so no leading, trailing or doubled
// '/'); segments of at most MaxSegmentLen bytes; no control characters
// (including NUL) and no backslash. Such a key, joined to a directory, always
// names a path below that directory.
//
// # Errors
//
// The error wraps ErrInvalidKey and names the key (quoted) and the rule it
// breaks.
func ValidateKey(key string) error {
	if rule := keyRule(key); rule != "" {
		return fmt.Errorf("%w: key %q: %s", ErrInvalidKey, key, rule)
	}
	return nil
}

// keyRule returns the rule key breaks, or "" when it is valid.
func keyRule(key string) string {
	switch {
	case key == "":
		return "key is empty"
	case len(key) > MaxKeyLen:
		return fmt.Sprintf("key is %d bytes long; the limit is %d", len(key), MaxKeyLen)
	case key[0] == '/':
		return "key starts with '/'; keys are relative paths such as \"tenants/acme/modules/x.wasm\""
	case key[len(key)-1] == '/':
		return "key ends with '/'; an object key names an object, not a directory"
	}
	if r := textRule(key); r != "" {
		return r
	}
	for seg := range strings.SplitSeq(key, "/") {
		if r := segmentRule(seg); r != "" {
			return r
		}
	}
	return ""
}

// textRule checks what is required of every key, prefix and name: valid
// UTF-8 with no control characters and no backslash.
func textRule(s string) string {
	if !utf8.ValidString(s) {
		return "key is not valid UTF-8"
	}
	for i, r := range s {
		switch {
		case r == 0:
			return fmt.Sprintf("key contains a NUL byte at offset %d", i)
		case unicode.IsControl(r):
			return fmt.Sprintf("key contains the control character %U at offset %d", r, i)
		case r == '\\':
			return fmt.Sprintf("key contains a backslash at offset %d; use '/' to separate segments", i)
		}
	}
	return ""
}

func segmentRule(seg string) string {
	switch {
	case seg == "":
		return "key has an empty segment (\"//\")"
	case seg == "." || seg == "..":
		return fmt.Sprintf("key has a %q segment; keys cannot refer to a parent or current directory", seg)
	case len(seg) > MaxSegmentLen:
		return fmt.Sprintf("key has a segment of %d bytes; the limit is %d", len(seg), MaxSegmentLen)
	}
	return ""
}

// prefixRule checks a List prefix: empty, or a valid key optionally followed
// by one '/'. The last segment may be partial ("tenants/acme/mod").
func prefixRule(prefix string) string {
	if prefix == "" {
		return ""
	}
	if prefix == "/" {
		return "prefix is \"/\"; use \"\" to list every key"
	}
	return keyRule(strings.TrimSuffix(prefix, "/"))
}

// startAfterRule checks List's startAfter: only compared, never used as a
// path, so any short UTF-8 text without NUL will do.
func startAfterRule(s string) string {
	switch {
	case len(s) > MaxKeyLen:
		return fmt.Sprintf("startAfter is %d bytes long; the limit is %d", len(s), MaxKeyLen)
	case !utf8.ValidString(s):
		return "startAfter is not valid UTF-8"
	case strings.IndexByte(s, 0) >= 0:
		return "startAfter contains a NUL byte"
	}
	return ""
}

// precheck is what every Store operation checks first, on every backend: the
// store is open, the key is valid, the context is live. It returns the kind
// and message of the failure, or the context's error.
func precheck(ctx context.Context, closed bool, key string) (kind error, msg string, err error) {
	if closed {
		return ErrClosed, "the store was closed", nil
	}
	if rule := keyRule(key); rule != "" {
		return ErrInvalidKey, rule, nil
	}
	return nil, "", ctx.Err()
}
