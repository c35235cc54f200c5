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
//
// The CLI (`sluice plan`, `sluice run`) and the tests use it; it shells out
// to the go command and clang on PATH. [CToolchain] reports whether clang
// can build C guests, and what to install when it cannot.
package guestbuild
