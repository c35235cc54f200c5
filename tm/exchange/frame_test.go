package exchange

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"testing"

	"github.com/sluicehq/sluice/internal/abi"
)

// decodeFrames reads frames from r until EOF, validating each header and
// control payload as a connection would. A conn's read loop does
// the same with the same functions.
func decodeFrames(r *bufio.Reader, maxBuffer int, each func(h header, payload []byte) error) error {
	var hb [headerSize]byte
	for {
		h, err := readHeader(r, &hb, maxBuffer)
		if err != nil {
			if err == io.EOF {
				return nil
			}
			return err
		}
		p := make([]byte, h.length)
		if _, err := io.ReadFull(r, p); err != nil {
			return fmt.Errorf("%s payload: %w", frameName(h.typ), err)
		}
		if err := validatePayload(h.typ, p); err != nil {
			return err
		}
		if err := each(h, p); err != nil {
			return err
		}
	}
}

// FuzzFrame feeds arbitrary bytes to the frame decoder a data connection
// uses: it must never panic, never allocate more than a frame's limit, and
// every frame it accepts must re-encode to the same bytes.
func FuzzFrame(f *testing.F) {
	var seed []byte
	seed = appendFrame(seed, frameHello, 0, hello{version: 1, token: []byte("tok")}.payload())
	seed = appendFrame(seed, frameOpen, 3, open{producer: 1, consumer: 2, resultID: "r"}.payload())
	seed = appendFrame(seed, frameCredit, 3, creditPayload(4))
	seed = appendFrame(seed, frameBuffer, 3, abi.AppendBatch(nil, []abi.Record{{Value: []byte("v")}}))
	seed = appendFrame(seed, frameEvent, 3, eventPayload(Event{Type: CheckpointBarrier, CheckpointID: 9}))
	seed = appendFrame(seed, frameEvent, 3, eventPayload(Event{Type: Watermark, Timestamp: -5}))
	seed = appendFrame(seed, frameEvent, 3, eventPayload(Event{Type: WatermarkStatus, Idle: true}))
	seed = appendFrame(seed, frameReject, 3, rejectPayload(rejectNotRegistered, "later"))
	seed = appendFrame(seed, frameClose, 3, closePayload(closeAbort, "bye"))
	seed = appendFrame(seed, frameError, 0, textPayload("bad"))
	seed = appendFrame(seed, frameHelloOK, 0, helloOK{version: 1, maxFrame: 1 << 20}.payload())
	f.Add(seed)
	f.Add([]byte{frameBuffer, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff})
	f.Add([]byte{})
	const maxBuffer = 1 << 16
	f.Fuzz(func(t *testing.T, b []byte) {
		var again []byte
		err := decodeFrames(bufio.NewReader(bytes.NewReader(b)), maxBuffer, func(h header, p []byte) error {
			if h.typ == frameBuffer {
				if len(p) > maxBuffer {
					t.Fatalf("accepted a %d-byte buffer, limit %d", len(p), maxBuffer)
				}
				abi.DecodeBatch(nil, p) // must not panic either
			}
			again = appendFrame(again, h.typ, h.channel, p)
			return nil
		})
		if err == nil && !bytes.Equal(again, b) {
			t.Fatalf("re-encoding changed the frames")
		}
		if err != nil && !errors.Is(err, ErrProtocol) && !errors.Is(err, ErrFrameTooLarge) && len(again) == len(b) {
			t.Fatalf("error %v on a complete stream", err)
		}
	})
}

// FuzzDecodeBatchEquivalence checks that the exchange's in-place decoder
// agrees with abi.DecodeBatch on every input.
func FuzzDecodeBatchEquivalence(f *testing.F) {
	f.Add(abi.AppendBatch(nil, []abi.Record{{Value: []byte("a")}, {Key: []byte("k"), HasKey: true, HasTime: true, Time: 7}}))
	f.Add([]byte{0, 0, 0, 0})
	f.Add([]byte{1, 0, 0, 0, 4, 0, 0, 0, 0})
	f.Add(abi.AppendBatch(nil, []abi.Record{{Value: []byte("h"), Headers: []abi.Header{{Key: []byte("a"), Value: []byte("b")}}}}))
	f.Add([]byte{0xff, 0xff, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, b []byte) {
		want, werr := abi.DecodeBatch(nil, b)
		got, gerr := decodeBatch(make([]abi.Record, 3), b)
		if (werr == nil) != (gerr == nil) {
			t.Fatalf("abi: %v, exchange: %v", werr, gerr)
		}
		if gerr != nil {
			if !errors.Is(gerr, abi.ErrMalformedBatch) {
				t.Fatalf("error %v does not wrap ErrMalformedBatch", gerr)
			}
			return
		}
		if len(got) != len(want) {
			t.Fatalf("%d records, abi decoded %d", len(got), len(want))
		}
		for i := range want {
			w, g := want[i], got[i]
			if w.HasKey != g.HasKey || w.HasTime != g.HasTime || w.Time != g.Time || !bytes.Equal(w.Key, g.Key) || !bytes.Equal(w.Value, g.Value) || (w.Key == nil) != (g.Key == nil) ||
				!bytes.Equal(abi.AppendHeaders(nil, w.Headers), abi.AppendHeaders(nil, g.Headers)) {
				t.Fatalf("record %d: %+v, abi decoded %+v", i, g, w)
			}
		}
	})
}

// FuzzEvent checks the EVENT payload decoder: it never panics, and every
// payload it accepts re-encodes to the same bytes (one encoding per event).
func FuzzEvent(f *testing.F) {
	for _, ev := range []Event{
		{Type: EndOfPartition},
		{Type: CheckpointBarrier, CheckpointID: 7},
		{Type: Watermark, Timestamp: math.MinInt64},
		{Type: Watermark, Timestamp: math.MaxInt64},
		{Type: Watermark, Timestamp: 1_700_000_000_000},
		{Type: WatermarkStatus, Idle: true},
		{Type: WatermarkStatus},
	} {
		f.Add(eventPayload(ev))
	}
	f.Add([]byte{byte(WatermarkStatus), 2, 0, 0, 0, 0, 0, 0, 0})
	f.Add([]byte{9, 0, 0, 0, 0, 0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, p []byte) {
		ev, err := parseEvent(p)
		if err != nil {
			if !errors.Is(err, ErrProtocol) {
				t.Fatalf("error %v does not wrap ErrProtocol", err)
			}
			return
		}
		if again := eventPayload(ev); !bytes.Equal(again, p) {
			t.Fatalf("%v re-encodes to %x, not %x", ev, again, p)
		}
	})
}

func TestEventPayloadRoundTrip(t *testing.T) {
	for _, ev := range []Event{
		{Type: EndOfPartition},
		{Type: CheckpointBarrier, CheckpointID: 42},
		{Type: Watermark, Timestamp: -1},
		{Type: Watermark, Timestamp: math.MaxInt64},
		{Type: WatermarkStatus, Idle: true},
		{Type: WatermarkStatus, Idle: false},
	} {
		got, err := parseEvent(eventPayload(ev))
		if err != nil || got != ev {
			t.Errorf("%v: got %v, %v", ev, got, err)
		}
	}
	if _, err := parseEvent([]byte{byte(WatermarkStatus), 3, 0, 0, 0, 0, 0, 0, 0}); !errors.Is(err, ErrProtocol) {
		t.Errorf("a watermark status of 3 was accepted: %v", err)
	}
}
