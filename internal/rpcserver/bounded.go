package rpcserver

import (
	"context"
	"errors"
	"fmt"

	gthrift "github.com/cloudwego/gopkg/protocol/thrift"
	"github.com/cloudwego/kitex/pkg/remote"
	"github.com/cloudwego/kitex/pkg/remote/codec/thrift"
)

// boundedCodec is Kitex's Thrift payload codec preceded by a check of the
// whole message with a skip decoder, which reads lengths without
// allocating: a container or string that claims more elements or bytes
// than the frame holds (a list of 2^31-1 strings in a 30-byte frame) is
// refused before the real decoder would allocate for it. Without the check
// that decoder allocates the claimed size up front and one small frame
// kills the process with "out of memory" — a fatal error, not a panic
// the server could recover.
type boundedCodec struct {
	remote.PayloadCodec
	// requireFramed refuses messages whose length is unknown (unframed
	// Thrift), which cannot be checked before they are decoded.
	requireFramed bool
}

func newBoundedCodec(requireFramed bool) boundedCodec {
	return boundedCodec{PayloadCodec: thrift.NewThriftCodec(), requireFramed: requireFramed}
}

var errUnframed = errors.New("unframed thrift is not accepted: use a framed or TTHeader transport")

func (c boundedCodec) Unmarshal(ctx context.Context, msg remote.Message, in remote.ByteBuffer) error {
	n := msg.PayloadLen()
	if n <= 0 {
		if c.requireFramed {
			return remote.NewTransError(remote.ProtocolError, errUnframed)
		}
		return c.PayloadCodec.Unmarshal(ctx, msg, in)
	}
	b, err := in.Peek(n)
	if err != nil {
		return remote.NewTransError(remote.ProtocolError, fmt.Errorf("read thrift message: %w", err))
	}
	if err := CheckThrift(b); err != nil {
		return remote.NewTransError(remote.ProtocolError, err)
	}
	return c.PayloadCodec.Unmarshal(ctx, msg, in)
}

// CheckThrift reports whether b is one whole Thrift binary message (header
// and one struct) whose every length fits in b, within the skip decoder's
// nesting limit. It allocates nothing in proportion to the lengths it reads.
func CheckThrift(b []byte) error {
	_, _, _, l, err := gthrift.Binary.ReadMessageBegin(b)
	if err != nil {
		return fmt.Errorf("malformed thrift message: %w", err)
	}
	n, err := CheckThriftStruct(b[l:])
	if err != nil {
		return fmt.Errorf("malformed thrift message: %w", err)
	}
	if n != len(b)-l {
		return fmt.Errorf("malformed thrift message: %d bytes after the message", len(b)-l-n)
	}
	return nil
}

// CheckThriftStruct checks that b starts with one Thrift binary struct
// whose every length fits in b, and returns its length.
//
// # Notes
//
// The skip decoder of cloudwego/gopkg v0.2.0 indexes a table by the type
// byte and panics on type bytes past it (found by FuzzDecodeRequests); the
// panic is turned into an error here.
func CheckThriftStruct(b []byte) (n int, err error) {
	defer func() {
		if p := recover(); p != nil {
			n, err = 0, fmt.Errorf("malformed thrift struct: %v", p)
		}
	}()
	d := gthrift.NewBytesSkipDecoder(b)
	defer d.Release()
	buf, err := d.Next(gthrift.STRUCT)
	return len(buf), err
}
