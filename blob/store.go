package blob

import (
	"context"
	"io"
	"iter"
	"time"
)

// Store is a flat namespace of immutable-while-written objects addressed by
// key. Both backends (fs and s3) pass one conformance suite
// (blob/blobtest), so code written against Store behaves the same on either.
//
// Keys are checked by ValidateKey. A Store is safe for concurrent use.
//
// # Consistency
//
// Put is atomic: readers see the old object or the new one, never a mix or
// a prefix, and a failed or interrupted Put leaves nothing visible. When
// several Puts of one key race, one of them wins whole. A successful Put is
// visible to every later Get, Stat and List (read-after-write).
type Store interface {
	// Put stores the bytes read from r under key, replacing any object
	// there.
	//
	// size is the number of bytes to store, or -1 when unknown. With a
	// size, Put reads exactly size bytes and never reads past them; with
	// -1 it reads r to EOF. Memory stays bounded either way (the s3
	// backend buffers at most one part).
	//
	// # Errors
	//
	//   - ErrInvalidKey: key breaks the key rules.
	//   - ErrInvalidArgument: size < -1.
	//   - ErrSizeMismatch: r ended before size bytes.
	//   - A read error from r is returned wrapped (errors.Is finds it),
	//     with Kind nil; nothing is stored.
	//   - ErrAccessDenied, ErrUnavailable, ErrNotFound (missing bucket),
	//     ErrConflict (fs: a key below an object, or an object where keys
	//     exist below), ErrClosed.
	Put(ctx context.Context, key string, r io.Reader, size int64) error

	// Get opens the object at key for reading. The caller must Close the
	// reader. The reader sees one version of the object even if it is
	// replaced while being read.
	//
	// # Errors
	//
	//   - ErrNotFound: no object at key.
	//   - ErrInvalidKey, ErrAccessDenied, ErrUnavailable, ErrClosed.
	//   - Errors while reading (s3: a dropped connection) wrap
	//     ErrUnavailable.
	Get(ctx context.Context, key string) (io.ReadCloser, error)

	// GetRange opens length bytes of the object at key starting at
	// offset; length -1 reads to the end.
	//
	// A range that runs past the end is cut short at the end (a short
	// read, as in S3); offset == size gives an empty reader; offset >
	// size is an error.
	//
	// # Errors
	//
	//   - ErrInvalidRange: offset is past the end of the object.
	//   - ErrInvalidArgument: offset < 0 or length < -1.
	//   - As Get.
	GetRange(ctx context.Context, key string, offset, length int64) (io.ReadCloser, error)

	// Stat returns the object's metadata.
	//
	// # Errors
	//
	//   - ErrNotFound: no object at key.
	//   - ErrInvalidKey, ErrAccessDenied, ErrUnavailable, ErrClosed.
	Stat(ctx context.Context, key string) (Info, error)

	// List returns up to limit objects whose keys start with prefix and
	// sort after startAfter, in byte-wise lexicographic key order (as S3).
	// limit <= 0 means DefaultListLimit; limits above MaxListLimit are
	// cut to it. Pass Page.Next as startAfter to get the next page, or use
	// All.
	//
	// prefix is "" or a key prefix ("tenants/acme/", "tenants/acme/mod").
	// Objects whose keys are not valid keys (written by other tools) are
	// skipped.
	//
	// # Errors
	//
	//   - ErrInvalidKey: prefix or startAfter is malformed.
	//   - ErrAccessDenied, ErrUnavailable, ErrNotFound (missing bucket),
	//     ErrClosed.
	List(ctx context.Context, prefix, startAfter string, limit int) (Page, error)

	// Delete removes the object at key. Deleting a key that has no object
	// succeeds (as S3): Delete is idempotent on both backends.
	//
	// # Errors
	//
	//   - ErrInvalidKey, ErrAccessDenied, ErrUnavailable, ErrNotFound
	//     (missing bucket), ErrClosed.
	Delete(ctx context.Context, key string) error

	// Close releases the Store's resources. Calls after Close return
	// ErrClosed. Readers already returned by Get stay readable on fs;
	// on s3 they end with an error.
	Close() error
}

// List limits.
const (
	// DefaultListLimit is the page size List uses when limit <= 0.
	DefaultListLimit = 1000
	// MaxListLimit is the largest page List returns (S3's MaxKeys limit).
	MaxListLimit = 1000
)

// Info describes an object.
type Info struct {
	Key     string    // the object's key
	Size    int64     // length in bytes
	ModTime time.Time // when it was last written (s3: second precision)
	ETag    string    // s3: the entity tag; fs: empty
}

// Page is one page of a List.
type Page struct {
	// Items are in lexicographic key order.
	Items []Info
	// Truncated reports that more keys follow; pass Next as startAfter to
	// List to get them.
	Truncated bool
	// Next is the key of the last item when Truncated, else "".
	Next string
}

// All iterates over every object under prefix, fetching pages of
// DefaultListLimit as it goes. Iteration stops at the first error, which is
// yielded with a zero Info.
//
//	for info, err := range blob.All(ctx, s, "tenants/acme/") {
//		if err != nil { return err }
//		...
//	}
func All(ctx context.Context, s Store, prefix string) iter.Seq2[Info, error] {
	return func(yield func(Info, error) bool) {
		after := ""
		for {
			page, err := s.List(ctx, prefix, after, DefaultListLimit)
			if err != nil {
				yield(Info{}, err)
				return
			}
			for _, it := range page.Items {
				if !yield(it, nil) {
					return
				}
			}
			if !page.Truncated {
				return
			}
			after = page.Next
		}
	}
}

// clampLimit applies DefaultListLimit and MaxListLimit.
func clampLimit(limit int) int {
	if limit <= 0 {
		return DefaultListLimit
	}
	return min(limit, MaxListLimit)
}

// finishPage turns up to limit+1 items into a page of at most limit.
func finishPage(items []Info, limit int) Page {
	if len(items) > limit {
		items = items[:limit]
		return Page{Items: items, Truncated: true, Next: items[len(items)-1].Key}
	}
	return Page{Items: items}
}

// checkRange validates GetRange's arguments.
func checkRange(offset, length int64) string {
	switch {
	case offset < 0:
		return "offset is negative"
	case length < -1:
		return "length is below -1 (-1 means to the end)"
	}
	return ""
}

// emptyReader is what a zero-length range reads.
type emptyReader struct{}

func (emptyReader) Read([]byte) (int, error) { return 0, io.EOF }
func (emptyReader) Close() error             { return nil }
