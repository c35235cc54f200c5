package assemblyscript

import (
	"embed"
	"io/fs"
)

//go:embed assembly/*.ts package.json package-lock.json
var files embed.FS

// Sources returns the SDK's AssemblyScript files, the names of the assembly/
// directory without it ("index.ts", "abi.ts", ...).
func Sources() fs.FS {
	sub, err := fs.Sub(files, "assembly")
	if err != nil {
		// The directory is embedded above, so Sub cannot fail.
		panic(err)
	}
	return sub
}

// PackageJSON returns package.json, which pins the AssemblyScript compiler.
func PackageJSON() []byte { return mustRead("package.json") }

// PackageLock returns package-lock.json, the lock file `npm ci` installs
// the compiler from.
func PackageLock() []byte { return mustRead("package-lock.json") }

func mustRead(name string) []byte {
	b, err := files.ReadFile(name)
	if err != nil {
		// Embedded above, so ReadFile cannot fail.
		panic(err)
	}
	return b
}
