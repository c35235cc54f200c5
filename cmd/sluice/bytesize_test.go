package main

import "testing"

func TestByteSize(t *testing.T) {
	for in, want := range map[string]int64{"1": 1, "512MiB": 512 << 20, "2GiB": 2 << 30, "3 KiB": 3 << 10, "7B": 7, "1TiB": 1 << 40} {
		var b byteSize
		if err := b.Set(in); err != nil || int64(b) != want {
			t.Errorf("Set(%q) = %d, %v; want %d", in, b, err, want)
		}
	}
	for _, in := range []string{"", "0", "-1MiB", "1.5GiB", "12MB", "GiB", "99999999999TiB"} {
		var b byteSize
		if err := b.Set(in); err == nil {
			t.Errorf("Set(%q) = %d, want an error", in, b)
		}
	}
	if b := byteSize(512 << 20); b.String() != "512MiB" {
		t.Errorf("String() = %s", b.String())
	}
}
