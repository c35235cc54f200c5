// Package wasmbin is the host's one reader of the WebAssembly binary
// format: the module header, sections, LEB128 integers, the import and
// export sections, and the instructions of function bodies and constant
// expressions. The validator and the rewriter both read modules through it,
// so the two cannot disagree about where an instruction ends.
//
// It reads; it does not judge. What a module may contain is
// wasmhost/internal/validate's business, and what the host adds to it is
// wasmhost/internal/rewrite's. It must not import wazero or any other
// package of the project: it works on bytes, and every read is bounds
// checked, so any input gives an error rather than a panic.
package wasmbin
