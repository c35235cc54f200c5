package task

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/sluicehq/sluice/blob"
	"github.com/sluicehq/sluice/internal/checkpoint"
)

const (
	// readAhead is how far past a split's end the first range request
	// goes, to finish its last line without a second request.
	readAhead = 64 << 10
	// continueChunk is the size of each further range request when a line
	// runs longer than that.
	continueChunk = 1 << 20
	// maxLineBytes bounds one line, so a file without newlines cannot
	// exhaust memory.
	maxLineBytes = 16 << 20
)

// rangeReader reads an object from offset on, fetching it in ranges as it
// goes, so a split reads only a little past its end.
type rangeReader struct {
	ctx    context.Context
	store  blob.Store
	key    string
	off    int64 // next offset to request
	first  int64 // length of the first request
	rc     io.ReadCloser
	left   int64 // bytes the current range still owes
	eof    bool
	opened bool
}

func (r *rangeReader) Read(p []byte) (int, error) {
	for {
		if r.eof {
			return 0, io.EOF
		}
		if r.rc == nil {
			n := int64(continueChunk)
			if !r.opened {
				n = r.first
			}
			rc, err := r.store.GetRange(r.ctx, r.key, r.off, n)
			if err != nil {
				if r.opened && errors.Is(err, blob.ErrInvalidRange) {
					r.eof = true // the previous range ended exactly at the end
					return 0, io.EOF
				}
				return 0, fmt.Errorf("read %s at %d: %w", r.key, r.off, err)
			}
			r.rc, r.left, r.opened = rc, n, true
		}
		k, err := r.rc.Read(p)
		r.off += int64(k)
		r.left -= int64(k)
		if err == io.EOF {
			r.rc.Close()
			r.rc = nil
			if r.left > 0 {
				r.eof = true // a short range: the object ended
			}
			if k > 0 {
				return k, nil
			}
			continue
		}
		if err != nil {
			return k, fmt.Errorf("read %s at %d: %w", r.key, r.off, err)
		}
		return k, nil
	}
}

func (r *rangeReader) Close() error {
	if r.rc != nil {
		r.rc.Close()
		r.rc = nil
	}
	return nil
}

// readSplit calls line for every line that belongs to sp, without its
// trailing "\n" or "\r\n", with the offset in the object of the byte after
// it (where the next line starts). The slice is valid only during the call.
//
// A line belongs to the split that holds its first byte (as Hadoop's and
// Flink's text input formats): a split that does not start at 0 skips the
// partial line it starts in, and every split reads past its end to finish
// the last line that starts inside it. So each line of the object is read
// by exactly one split, whatever the split boundaries.
func readSplit(ctx context.Context, store blob.Store, sp checkpoint.Split, line func(b []byte, next int64) error) error {
	if sp.Offset < 0 || sp.Length < 0 {
		return fmt.Errorf("split %s@%d+%d: negative offset or length", sp.Key, sp.Offset, sp.Length)
	}
	start := sp.Offset
	if start > 0 {
		start-- // to see whether the split starts right after a newline
	}
	end := sp.Offset + sp.Length
	rr := &rangeReader{ctx: ctx, store: store, key: sp.Key, off: start, first: end - start + readAhead}
	defer rr.Close()
	br := bufio.NewReaderSize(rr, 64<<10)
	pos := start
	if sp.Offset > 0 {
		// Skip through the first newline at or after Offset-1: the line it
		// ends started in the previous split.
		for {
			b, err := br.ReadSlice('\n')
			pos += int64(len(b))
			if err == nil {
				break
			}
			if err == io.EOF {
				return nil
			}
			if err != bufio.ErrBufferFull {
				return err
			}
		}
	}
	var long []byte
	for pos < end { // the next line starts inside the split
		b, n, err := readLine(br, &long)
		pos += n
		if err == io.EOF && n == 0 {
			return nil
		}
		if err != nil && err != io.EOF {
			return fmt.Errorf("split %s@%d: %w", sp.Key, sp.Offset, err)
		}
		b = bytes.TrimSuffix(b, []byte{'\n'})
		b = bytes.TrimSuffix(b, []byte{'\r'})
		if lerr := line(b, pos); lerr != nil {
			return lerr
		}
		if err == io.EOF {
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}
	return nil
}

// readLine reads one line, with its newline if it has one, and the number
// of bytes consumed. A line longer than the reader's buffer is gathered in
// *long. io.EOF comes with the last line when it has no newline.
func readLine(br *bufio.Reader, long *[]byte) ([]byte, int64, error) {
	*long = (*long)[:0]
	for {
		b, err := br.ReadSlice('\n')
		if err == bufio.ErrBufferFull {
			*long = append(*long, b...)
			if len(*long) > maxLineBytes {
				return nil, int64(len(*long)), fmt.Errorf("a line longer than %d bytes", maxLineBytes)
			}
			continue
		}
		if len(*long) > 0 {
			*long = append(*long, b...)
			b = *long
		}
		return b, int64(len(b)), err
	}
}
