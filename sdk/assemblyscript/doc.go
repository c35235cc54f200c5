// Package assemblyscript is the Sluice guest SDK for AssemblyScript. The SDK
// itself is the AssemblyScript source in assembly/ (the package "sluice" a
// guest imports); package.json and package-lock.json pin the compiler every
// AssemblyScript guest is built with. See README.md and docs/assemblyscript.md.
//
// The Go package only embeds those files, so that the CLI (through
// internal/guestbuild) can build an AssemblyScript guest from any directory
// without a copy of this repository: it installs the pinned compiler with
// `npm ci` into the user's cache and puts the SDK where the compiler finds
// it. It uses the standard library only.
package assemblyscript
