// Package validate decides whether the host accepts a guest module, in two
// steps around wazero's compiler:
//
//   - [Structure], before wazero sees the bytes: every vector's declared
//     count fits in what is left of its section, functions declare a bounded
//     number of locals, and tables start within the host's cap, so wazero's
//     decoder allocates memory in proportion to the module's size.
//   - [ABI], on wazero's compiled module: the exports, imports and memory
//     of Sluice guest ABI v1 (docs/ABI.md).
//
// It reads the binary format through wasmhost/internal/wasmbin only. It
// must not import wasmhost or wasmhost/internal/rewrite (the rewriter runs
// between the two steps, and the runtime calls both), nor anything of jm
// or tm.
package validate
