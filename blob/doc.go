// Package blob is the blob store: job modules, inputs, checkpoints, savepoints
// and results. A Store is opened from a URL: file:///abs/dir (the embedded
// default) or s3://bucket/prefix (MinIO, AWS S3, any S3 API, via minio-go).
//
// Keys follow one scheme, tenant first (see Keys); modules are stored
// content-addressed by sha256 and verified on every read. It must not import
// jm, tm or wasmhost.
package blob
