// Package guestbuild compiles a guest directory into a Sluice guest module,
// a wasm reactor cached under <cache>/<hash>.wasm:
//
//   - A directory with .go files (tests aside) is a Go main package, built
//     with `go build -buildmode=c-shared` for GOOS=wasip1 GOARCH=wasm and
//     hashed over every source file the package depends on, so a second
//     build of unchanged sources costs one `go list`.
//   - A directory with .c files and no .go files but tests is a C guest
//     (docs/ABI.md section 9), built with `clang --target=wasm32-wasi -O2
//     -mexec-model=reactor` from every .c file in it and hashed over
//     clang's version, the flags and every .c and .h file in it.
//   - A directory with a Cargo.toml is a Rust crate (sdk/rust,
//     docs/rust.md), built as a cdylib with Debian's `/usr/bin/cargo build
//     --offline --release --target wasm32-wasi` into a target directory in
//     the cache, never in the sources, and hashed over rustc's and cargo's
//     versions, the flags, Cargo.lock and every file of the crate and of
//     its path dependencies, with their directories remapped out of the
//     module so that the same sources give the same bytes anywhere.
//   - A directory with an asconfig.json is an AssemblyScript guest
//     (sdk/assemblyscript, docs/assemblyscript.md), built with the compiler
//     the SDK's lock file pins, installed once by `npm ci` into the user
//     cache, and hashed over the lock file, node's version, the SDK, the
//     flags and the guest's sources.
//
// [BuildWith] can also run Binaryen's wasm-opt over a Go guest at a level
// ([Options.WasmOpt], `sluice run --wasm-opt`), caching the optimized module
// by the plain one's hash, wasm-opt's version, the level and the flags;
// [WasmOptToolchain] reports whether wasm-opt works.
//
// The CLI (`sluice plan`, `sluice run`) and the tests use it; it shells out
// to the go command and clang on PATH, and to /usr/bin/cargo. [CToolchain]
// [RustToolchain] and [ASToolchain] report whether C, Rust and AssemblyScript
// guests can be built, and what to install when they cannot.
package guestbuild
