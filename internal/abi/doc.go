// Package abi is the wire format shared by the guest SDK and the host: the
// batch encoding of records, and the names and version of the guest ABI
// (docs/ABI.md). The data exchange between tasks uses the same encoding.
//
// It uses the standard library only, so sdk/guest can import it when built
// for wasip1. It must not import anything from the host side.
package abi
