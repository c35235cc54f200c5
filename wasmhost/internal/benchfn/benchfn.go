package benchfn

// Upper appends src with ASCII letters upper-cased to dst.
func Upper(dst, src []byte) []byte {
	n := len(dst)
	dst = append(dst, src...)
	b := dst[n:]
	for i, c := range b {
		if 'a' <= c && c <= 'z' {
			b[i] = c - ('a' - 'A')
		}
	}
	return dst
}
