package main

import (
	"fmt"
	"strconv"
	"strings"
)

// byteSize is a flag of a number of bytes: a whole number with an optional
// binary unit (KiB, MiB, GiB, TiB), e.g. 512MiB.
type byteSize int64

var byteUnits = []struct {
	suffix string
	shift  uint
}{{"TiB", 40}, {"GiB", 30}, {"MiB", 20}, {"KiB", 10}, {"B", 0}}

func (b *byteSize) String() string {
	n := int64(*b)
	for _, u := range byteUnits {
		if u.shift > 0 && n != 0 && n%(1<<u.shift) == 0 {
			return strconv.FormatInt(n>>u.shift, 10) + u.suffix
		}
	}
	return strconv.FormatInt(n, 10)
}

// Set parses s.
func (b *byteSize) Set(s string) error {
	num, shift := strings.TrimSpace(s), uint(0)
	for _, u := range byteUnits {
		if rest, ok := strings.CutSuffix(num, u.suffix); ok {
			num, shift = strings.TrimSpace(rest), u.shift
			break
		}
	}
	n, err := strconv.ParseInt(num, 10, 64)
	if err != nil || n < 1 || n > (1<<62)>>shift {
		return fmt.Errorf("%q is not a size: write a positive whole number of bytes, or one with KiB, MiB, GiB or TiB (e.g. 512MiB)", s)
	}
	*b = byteSize(n << shift)
	return nil
}

// Type names the flag's value in usage.
func (b *byteSize) Type() string { return "size" }
