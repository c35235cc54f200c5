package exchange

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// Frame types on the data connection.
const (
	frameHello   byte = 1
	frameHelloOK byte = 2
	frameOpen    byte = 3
	frameReject  byte = 4
	frameCredit  byte = 5
	frameBuffer  byte = 6
	frameEvent   byte = 7
	frameClose   byte = 8
	frameError   byte = 9
)

const (
	headerSize = 9
	// protocolVersion is the data protocol spoken in HELLO. Version 2 added
	// the WATERMARK and WATERMARK_STATUS events: a version 1 peer would fail
	// on them mid-stream, so it is refused at the handshake.
	protocolVersion = 2
	helloMagic      = "SLXC"
	// maxControlPayload bounds every frame that is not a BUFFER, and every
	// frame before the handshake completed.
	maxControlPayload = 4096
	maxResultIDLen    = 1024
	maxTokenLen       = 1024
	// minMaxBufferSize is the smallest frame limit a Manager accepts, so that
	// control frames always fit.
	minMaxBufferSize = maxControlPayload
)

// CLOSE codes.
const (
	closeAbort    byte = 1 // the channel ended early: its consumer (or producer) fails
	closeWithdraw byte = 2 // the producer gave up opening the channel; it sent nothing on it
)

// Reject codes.
const (
	rejectNotRegistered byte = 1 // the consumer has not opened that input yet: retry
	rejectInvalid       byte = 2 // the channel can never be accepted
)

// ErrFrameTooLarge is the error of a connection that received a frame whose
// declared length exceeds the limit; the connection is closed.
var ErrFrameTooLarge = errors.New("data frame exceeds the size limit")

// ErrProtocol is the error of a connection whose peer broke the data
// protocol (bad handshake, unknown frame type, malformed payload, data
// without credit); the connection is closed.
var ErrProtocol = errors.New("data protocol violation")

func frameName(t byte) string {
	switch t {
	case frameHello:
		return "HELLO"
	case frameHelloOK:
		return "HELLO_OK"
	case frameOpen:
		return "OPEN"
	case frameReject:
		return "REJECT"
	case frameCredit:
		return "CREDIT"
	case frameBuffer:
		return "BUFFER"
	case frameEvent:
		return "EVENT"
	case frameClose:
		return "CLOSE"
	case frameError:
		return "ERROR"
	}
	return fmt.Sprintf("type %d", t)
}

type header struct {
	typ     byte
	channel uint32
	length  uint32
}

func putHeader(b []byte, h header) {
	b[0] = h.typ
	binary.LittleEndian.PutUint32(b[1:5], h.channel)
	binary.LittleEndian.PutUint32(b[5:9], h.length)
}

func appendFrame(dst []byte, typ byte, channel uint32, payload []byte) []byte {
	var h [headerSize]byte
	putHeader(h[:], header{typ, channel, uint32(len(payload))})
	dst = append(dst, h[:]...)
	return append(dst, payload...)
}

// readHeader reads one frame header and checks its type and declared length
// against the limits: maxBuffer for BUFFER frames, maxControlPayload for the
// others. It never allocates for the payload.
func readHeader(r io.Reader, hb *[headerSize]byte, maxBuffer int) (header, error) {
	if _, err := io.ReadFull(r, hb[:]); err != nil {
		return header{}, err
	}
	h := header{typ: hb[0], channel: binary.LittleEndian.Uint32(hb[1:5]), length: binary.LittleEndian.Uint32(hb[5:9])}
	if h.typ < frameHello || h.typ > frameError {
		return h, fmt.Errorf("%w: unknown frame type %d", ErrProtocol, h.typ)
	}
	limit := maxControlPayload
	if h.typ == frameBuffer {
		limit = maxBuffer
	}
	if uint64(h.length) > uint64(limit) {
		return h, fmt.Errorf("%w: %s frame declares %d bytes, limit %d", ErrFrameTooLarge, frameName(h.typ), h.length, limit)
	}
	return h, nil
}

// hello is the first frame a producer sends.
type hello struct {
	version uint16
	token   []byte
}

func (h hello) payload() []byte {
	b := append([]byte(nil), helloMagic...)
	b = binary.LittleEndian.AppendUint16(b, h.version)
	b = binary.LittleEndian.AppendUint16(b, uint16(len(h.token)))
	return append(b, h.token...)
}

func parseHello(p []byte) (hello, error) {
	if len(p) < 8 || string(p[:4]) != helloMagic {
		return hello{}, fmt.Errorf("%w: HELLO without the %q magic (is this a Sluice data port?)", ErrProtocol, helloMagic)
	}
	h := hello{version: binary.LittleEndian.Uint16(p[4:6])}
	n := int(binary.LittleEndian.Uint16(p[6:8]))
	if n > maxTokenLen || len(p) != 8+n {
		return hello{}, fmt.Errorf("%w: HELLO token length %d does not match %d payload bytes", ErrProtocol, n, len(p))
	}
	h.token = p[8:]
	return h, nil
}

type helloOK struct {
	version  uint16
	maxFrame uint32
}

func (h helloOK) payload() []byte {
	b := binary.LittleEndian.AppendUint16(nil, h.version)
	return binary.LittleEndian.AppendUint32(b, h.maxFrame)
}

func parseHelloOK(p []byte) (helloOK, error) {
	if len(p) != 6 {
		return helloOK{}, fmt.Errorf("%w: HELLO_OK of %d bytes, want 6", ErrProtocol, len(p))
	}
	h := helloOK{version: binary.LittleEndian.Uint16(p), maxFrame: binary.LittleEndian.Uint32(p[2:])}
	if h.maxFrame < minMaxBufferSize {
		return h, fmt.Errorf("%w: HELLO_OK max frame %d below %d", ErrProtocol, h.maxFrame, minMaxBufferSize)
	}
	return h, nil
}

// open asks the consumer to accept a channel.
type open struct {
	producer uint32
	consumer uint32
	resultID string
}

func (o open) payload() []byte {
	b := binary.LittleEndian.AppendUint32(nil, o.producer)
	b = binary.LittleEndian.AppendUint32(b, o.consumer)
	return append(b, o.resultID...)
}

func parseOpen(p []byte) (open, error) {
	if len(p) < 8 || len(p)-8 > maxResultIDLen {
		return open{}, fmt.Errorf("%w: OPEN of %d bytes", ErrProtocol, len(p))
	}
	o := open{producer: binary.LittleEndian.Uint32(p), consumer: binary.LittleEndian.Uint32(p[4:]), resultID: string(p[8:])}
	if o.producer > 1<<24 || o.consumer > 1<<24 {
		return open{}, fmt.Errorf("%w: OPEN subtask out of range (%d, %d)", ErrProtocol, o.producer, o.consumer)
	}
	return o, nil
}

func rejectPayload(code byte, msg string) []byte {
	if len(msg) > maxControlPayload-1 {
		msg = msg[:maxControlPayload-1]
	}
	return append([]byte{code}, msg...)
}

func parseReject(p []byte) (code byte, msg string, err error) {
	if len(p) < 1 || (p[0] != rejectNotRegistered && p[0] != rejectInvalid) {
		return 0, "", fmt.Errorf("%w: malformed REJECT", ErrProtocol)
	}
	return p[0], string(p[1:]), nil
}

func creditPayload(n uint32) []byte { return binary.LittleEndian.AppendUint32(nil, n) }

func parseCredit(p []byte) (uint32, error) {
	if len(p) != 4 {
		return 0, fmt.Errorf("%w: CREDIT of %d bytes, want 4", ErrProtocol, len(p))
	}
	n := binary.LittleEndian.Uint32(p)
	if n == 0 || n > 1<<16 {
		return 0, fmt.Errorf("%w: CREDIT of %d buffers", ErrProtocol, n)
	}
	return n, nil
}

// An EVENT payload is the type and one little-endian 64-bit argument: the
// checkpoint id of a barrier, the timestamp of a watermark, 1 (idle) or 0
// (active) for a watermark status, 0 for END_OF_PARTITION.
func eventPayload(ev Event) []byte {
	var arg uint64
	switch ev.Type {
	case CheckpointBarrier:
		arg = uint64(ev.CheckpointID)
	case Watermark:
		arg = uint64(ev.Timestamp)
	case WatermarkStatus:
		if ev.Idle {
			arg = 1
		}
	}
	return binary.LittleEndian.AppendUint64([]byte{byte(ev.Type)}, arg)
}

func parseEvent(p []byte) (Event, error) {
	if len(p) != 9 {
		return Event{}, fmt.Errorf("%w: EVENT of %d bytes, want 9", ErrProtocol, len(p))
	}
	ev := Event{Type: EventType(p[0])}
	arg := binary.LittleEndian.Uint64(p[1:])
	switch ev.Type {
	case EndOfPartition:
		if arg != 0 {
			return Event{}, fmt.Errorf("%w: END_OF_PARTITION with argument %d", ErrProtocol, arg)
		}
	case CheckpointBarrier:
		ev.CheckpointID = int64(arg)
	case Watermark:
		ev.Timestamp = int64(arg)
	case WatermarkStatus:
		if arg > 1 {
			return Event{}, fmt.Errorf("%w: WATERMARK_STATUS %d, want 0 (active) or 1 (idle)", ErrProtocol, arg)
		}
		ev.Idle = arg == 1
	default:
		return Event{}, fmt.Errorf("%w: unknown event type %d", ErrProtocol, p[0])
	}
	return ev, nil
}

func closePayload(code byte, msg string) []byte {
	if len(msg) > maxControlPayload-1 {
		msg = msg[:maxControlPayload-1]
	}
	return append([]byte{code}, msg...)
}

func parseClose(p []byte) (code byte, msg string, err error) {
	if len(p) < 1 || (p[0] != closeAbort && p[0] != closeWithdraw) {
		return 0, "", fmt.Errorf("%w: malformed CLOSE", ErrProtocol)
	}
	return p[0], string(p[1:]), nil
}

func textPayload(msg string) []byte {
	if len(msg) > maxControlPayload {
		msg = msg[:maxControlPayload]
	}
	return []byte(msg)
}

// validatePayload checks a control frame's payload. BUFFER payloads are
// checked by abi.DecodeBatch when the consumer reads them.
func validatePayload(typ byte, p []byte) error {
	var err error
	switch typ {
	case frameHello:
		_, err = parseHello(p)
	case frameHelloOK:
		_, err = parseHelloOK(p)
	case frameOpen:
		_, err = parseOpen(p)
	case frameReject:
		_, _, err = parseReject(p)
	case frameCredit:
		_, err = parseCredit(p)
	case frameEvent:
		_, err = parseEvent(p)
	case frameClose:
		_, _, err = parseClose(p)
	}
	return err
}
