package statecodec

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
)

// Snapshot format, all integers little-endian:
//
//	"SLST" u32 version=1 u32 maxParallelism u32 start u32 end
//	u32 n, n × (u32 len, opKey, u32 len, value)           operator state
//	per non-empty key group: u32 group,
//	  u32 n, n × (u32 len, stateKey, u32 len, value)       keyed state
//	  u32 n, n × (u32 len, timerKey)                       timers
//	u32 0xffffffff                                         end of groups
//	u32 CRC-32 (IEEE) of everything before
//
// Entries come in whatever order the writer has them: sorting would double
// the cost of a checkpoint, and nothing needs it (Decode reads any order;
// compare snapshots by what they restore to, not by their bytes).
const (
	magic       = "SLST"
	version     = 1
	endOfGroups = 0xffffffff
	headerLen   = 4 + 4*4
)

// TimerKeyMin is the length of a timer key's fixed prefix, u32 vertex and
// i64 time; Decode refuses shorter timer keys.
const TimerKeyMin = 12

// Encoder appends one snapshot to a buffer. Write in this order: [Encoder.Ops]
// with the operator state entries' count, that many [Encoder.Entry]; then
// per key group [Encoder.Group], its entries, [Encoder.Timers] and its timer
// keys; then [Encoder.Finish]. Counts that do not match what follows make a
// snapshot Decode refuses.
type Encoder struct {
	b    []byte
	base int
}

// NewEncoder starts a snapshot of the key groups start..end (inclusive) of
// maxParallelism, appended to dst: a caller that keeps its buffer from one
// checkpoint to the next allocates nothing.
func NewEncoder(dst []byte, maxParallelism, start, end int) Encoder {
	e := Encoder{b: dst, base: len(dst)}
	e.b = append(e.b, magic...)
	e.u32(version)
	e.u32(uint32(maxParallelism))
	e.u32(uint32(start))
	e.u32(uint32(end))
	return e
}

func (e *Encoder) u32(v uint32) { e.b = binary.LittleEndian.AppendUint32(e.b, v) }

func (e *Encoder) blob(v string) {
	e.u32(uint32(len(v)))
	e.b = append(e.b, v...)
}

// Ops begins the operator state: n entries follow.
func (e *Encoder) Ops(n int) { e.u32(uint32(n)) }

// Entry writes one entry of operator or keyed state.
func (e *Encoder) Entry(key string, value []byte) {
	e.blob(key)
	e.u32(uint32(len(value)))
	e.b = append(e.b, value...)
}

// Group begins key group g (of the whole job, not relative to start):
// entries entries follow. Leave out groups with no entries and no timers.
func (e *Encoder) Group(g, entries int) {
	e.u32(uint32(g))
	e.u32(uint32(entries))
}

// Timers follows a group's entries: n timer keys follow.
func (e *Encoder) Timers(n int) { e.u32(uint32(n)) }

// Timer writes one timer key.
func (e *Encoder) Timer(key string) { e.blob(key) }

// Finish ends the snapshot and returns the buffer with it appended.
func (e *Encoder) Finish() []byte {
	e.u32(endOfGroups)
	e.u32(crc32.ChecksumIEEE(e.b[e.base:]))
	return e.b
}

// Snapshot is a decoded snapshot. Its slices alias the bytes it was decoded
// from.
type Snapshot struct {
	MaxParallelism, Start, End int
	Ops                        []Entry
	Groups                     []Group
}

// Entry is one entry of operator or keyed state.
type Entry struct{ Key, Value []byte }

// Group is the keyed state and timers of one key group.
type Group struct {
	KeyGroup int
	Entries  []Entry
	Timers   [][]byte
}

// Decode reads a whole snapshot taken with maxParallelism key groups.
//
// # Errors
//
// When b is not a snapshot (no header, a checksum mismatch, another
// version), was taken with a different max parallelism (key groups cannot
// be split), or is malformed: a key group outside its range, a timer key
// shorter than TimerKeyMin, truncated or trailing bytes.
func Decode(b []byte, maxParallelism int) (*Snapshot, error) {
	if len(b) < headerLen+4+4 || string(b[:4]) != magic {
		return nil, errors.New("no SLST header")
	}
	body, sum := b[:len(b)-4], binary.LittleEndian.Uint32(b[len(b)-4:])
	if crc32.ChecksumIEEE(body) != sum {
		return nil, errors.New("checksum mismatch")
	}
	d := &reader{b: body[4:]}
	ver, maxP, start, end := d.u32(), d.u32(), d.u32(), d.u32()
	if ver != version {
		return nil, fmt.Errorf("version %d, want %d", ver, version)
	}
	if int(maxP) != maxParallelism {
		return nil, fmt.Errorf("taken with max parallelism %d, this state has %d", maxP, maxParallelism)
	}
	s := &Snapshot{MaxParallelism: int(maxP), Start: int(start), End: int(end)}
	n := d.u32()
	for i := uint32(0); i < n && d.err == nil; i++ {
		s.Ops = append(s.Ops, Entry{d.bytes(d.u32()), d.bytes(d.u32())})
	}
	for d.err == nil {
		kg := d.u32()
		if d.err != nil || kg == endOfGroups {
			break
		}
		if kg < start || kg > end || kg >= maxP {
			return nil, fmt.Errorf("key group %d outside the snapshot's range %d..%d", kg, start, end)
		}
		gr := Group{KeyGroup: int(kg)}
		n := d.u32()
		for i := uint32(0); i < n && d.err == nil; i++ {
			gr.Entries = append(gr.Entries, Entry{d.bytes(d.u32()), d.bytes(d.u32())})
		}
		n = d.u32()
		for i := uint32(0); i < n && d.err == nil; i++ {
			tk := d.bytes(d.u32())
			if d.err == nil && len(tk) < TimerKeyMin {
				return nil, fmt.Errorf("timer entry of %d bytes", len(tk))
			}
			gr.Timers = append(gr.Timers, tk)
		}
		s.Groups = append(s.Groups, gr)
	}
	if d.err != nil {
		return nil, d.err
	}
	if len(d.b) != 0 {
		return nil, fmt.Errorf("%d trailing bytes", len(d.b))
	}
	return s, nil
}

// errTruncated is the error of a read past the end of a snapshot.
var errTruncated = errors.New("truncated")

type reader struct {
	b   []byte
	err error
}

func (r *reader) bytes(n uint32) []byte {
	if r.err != nil || uint64(n) > uint64(len(r.b)) {
		r.err = errTruncated
		return nil
	}
	b := r.b[:n]
	r.b = r.b[n:]
	return b
}

func (r *reader) u32() uint32 {
	b := r.bytes(4)
	if r.err != nil {
		return 0
	}
	return binary.LittleEndian.Uint32(b)
}
