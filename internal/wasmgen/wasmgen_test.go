package wasmgen

import (
	"bytes"
	"testing"
)

func TestNestAndBytes(t *testing.T) {
	if got := Nest(Loop, 2, []byte{0x01}); !bytes.Equal(got, []byte{Loop, 0x40, Loop, 0x40, 0x01, End, End}) {
		t.Fatalf("Nest: % x", got)
	}
	// One function () -> () with body "nop": the smallest valid module the
	// builder makes, byte for byte.
	want := []byte("\x00asm\x01\x00\x00\x00" +
		"\x01\x04\x01\x60\x00\x00" + "\x03\x02\x01\x00" + "\x05\x03\x01\x00\x01" +
		"\x0a\x05\x01\x03\x00\x01\x0b")
	if got := (Module{Body: []byte{0x01}}).Bytes(); !bytes.Equal(got, want) {
		t.Fatalf("Bytes:\n% x\nwant\n% x", got, want)
	}
}
