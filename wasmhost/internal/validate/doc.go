// Package validate decides whether the host accepts a guest module, in two
// steps around wazero's compiler:
//
//   - [Structure], before wazero sees the bytes, in one streaming pass:
//     every vector's declared count fits in what is left of its section,
//     every instruction decodes, and the module's [Shape] (nesting, loop
//     nesting, functions, body sizes, locals, tables, segments…) is within
//     the host's limits, so wazero's decoder allocates memory in proportion
//     to the module's size and its compiler's worst case per function is
//     bounded (docs/SECURITY.md, "Module limits").
//   - [ABI], on wazero's compiled module: the exports, imports and memory
//     of Sluice guest ABI v1 (docs/ABI.md).
//
// It reads the binary format through wasmhost/internal/wasmbin only. It
// must not import wasmhost or wasmhost/internal/rewrite (the rewriter runs
// between the two steps, and the runtime calls both), nor anything of jm
// or tm.
package validate
