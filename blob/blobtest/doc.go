// Package blobtest is the conformance suite every blob.Store backend must
// pass. The fs and s3 backends run it in their tests; a new backend should
// too:
//
//	func TestConformance(t *testing.T) {
//		blobtest.Run(t, func(t *testing.T) blob.Store { return openMine(t) })
//	}
//
// Payloads are generated as streams, so even the 64 MiB cases never hold an
// object in memory.
package blobtest
