// Package blob is the blob store: job modules, inputs, checkpoints, savepoints
// and results. A Store is opened from a URL: file:///abs/dir (the embedded
// default) or s3://bucket/prefix (MinIO, AWS S3, any S3 API, via minio-go).
//
//	s, err := blob.Open(ctx, "s3://sluice/prod?endpoint=minio:9000&secure=false")
//	...
//	err = s.Put(ctx, key, r, size) // atomic: the old object or the new, never a mix
//	rc, err := s.Get(ctx, key)
//
// Keys follow one scheme, tenant first (see Keys); modules are stored
// content-addressed by sha256 and verified on every read (PutModule,
// GetModule).
//
// # Backends
//
// Both backends pass one conformance suite, blob/blobtest, so callers see the
// same behaviour: atomic Put, read-after-write, lexicographic paginated List,
// idempotent Delete, the same key rules (ValidateKey) and the same errors.
// The one difference: fs cannot hold a key and another key below it ("a"
// and "a/b"); it returns ErrConflict where S3 would accept both.
//
// # Errors
//
// Every error is an *Error naming the operation, the key and the store; test
// the cause with errors.Is against ErrNotFound, ErrAccessDenied,
// ErrInvalidKey, ErrInvalidURL, ErrInvalidArgument, ErrInvalidRange,
// ErrUnavailable, ErrSizeMismatch, ErrDigestMismatch, ErrConflict and
// ErrClosed. S3 error codes map to these in one table (errors.go).
//
// # Imports
//
// blob depends on the standard library, minio-go and golang.org/x/sys/unix
// only. It must not import
// jm, tm, wasmhost, sdk or idl: those depend on it, not the other way round.
package blob
