package wasmhost

import (
	"bytes"
	"container/heap"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/sluicehq/sluice/internal/keygroup"
	"github.com/sluicehq/sluice/wasmhost/internal/statecodec"
)

// State is a task's host-managed state: keyed state and timers by key
// group, and operator state. Guests reach it through the ABI; the host
// snapshots it at checkpoints and restores it on recovery, at the same or a
// different parallelism (whole key groups move between subtasks).
//
// # Notes
//
// Methods are safe for concurrent use, but a consistent checkpoint needs
// Freeze to run between Barrier and the next call into the guest; the
// Frozen copy may be encoded elsewhere while the task goes on.
type State struct {
	mu         sync.Mutex
	maxP       int
	start, end int // inclusive key group range

	groups []map[string][]byte   // keyed state per key group, by stateKey
	timers []map[string]struct{} // timers per key group, by timerKey
	ops    map[string][]byte     // operator state by opKey
	queue  timerQueue            // processing-time timers
	equeue timerQueue            // event-time timers (eventTimerBit)
	// bytes is what the entries cost in host memory (entryCost,
	// timerCost), for Limits.MaxStateBytes; nTimers counts the live timers.
	bytes   int64
	nTimers int
	// A Freeze hands the keyed maps themselves to the Frozen copy: until
	// it is released, keyed writes go to delta (per group, nil entries
	// until written) and reads look there first; Release folds delta back.
	// layered is that Frozen; copies counts Frozen copies that hold value
	// slices (taken while another was outstanding). While either exists,
	// values outside delta are never overwritten in place.
	delta   []map[string]deltaValue
	layered *Frozen
	copies  int
}

// deltaValue is a keyed write made while the maps are frozen; gone marks
// a delete.
type deltaValue struct {
	v    []byte
	gone bool
}

// kv returns the value under ck in group g.
func (s *State) kv(g int, ck string) ([]byte, bool) {
	if s.delta != nil {
		if d, ok := s.delta[g][ck]; ok {
			return d.v, !d.gone
		}
	}
	v, ok := s.groups[g][ck]
	return v, ok
}

// setKV stores v (owned by the State from now on) under ck in group g.
func (s *State) setKV(g int, ck string, v []byte) {
	if s.delta != nil {
		if s.delta[g] == nil {
			s.delta[g] = make(map[string]deltaValue)
		}
		s.delta[g][ck] = deltaValue{v: v}
		return
	}
	if s.groups[g] == nil {
		s.groups[g] = make(map[string][]byte)
	}
	s.groups[g][ck] = v
}

// delKV deletes ck from group g.
func (s *State) delKV(g int, ck string) {
	if s.delta != nil {
		if s.delta[g] == nil {
			s.delta[g] = make(map[string]deltaValue)
		}
		s.delta[g][ck] = deltaValue{gone: true}
		return
	}
	delete(s.groups[g], ck)
}

// reusable reports whether the value under ck in group g may be
// overwritten in place: no Frozen copy can hold it.
func (s *State) reusable(g int, ck string) bool {
	if s.copies > 0 {
		return false
	}
	if s.delta == nil {
		return true
	}
	_, inDelta := s.delta[g][ck]
	return inDelta
}

// NewState returns empty state for the key groups keyGroupStart..keyGroupEnd
// (inclusive) of maxParallelism, as keygroup.Range gives them.
func NewState(maxParallelism, keyGroupStart, keyGroupEnd int) *State {
	if maxParallelism < 1 {
		maxParallelism = 1
	}
	if keyGroupStart < 0 {
		keyGroupStart = 0
	}
	if keyGroupEnd < keyGroupStart {
		keyGroupEnd = keyGroupStart - 1 // no key groups
	}
	n := keyGroupEnd - keyGroupStart + 1
	s := &State{
		maxP: maxParallelism, start: keyGroupStart, end: keyGroupEnd,
		groups: make([]map[string][]byte, n),
		timers: make([]map[string]struct{}, n),
		ops:    make(map[string][]byte),
	}
	return s
}

// KeyGroups returns the max parallelism and the inclusive range of key
// groups s holds.
func (s *State) KeyGroups() (maxParallelism, start, end int) { return s.maxP, s.start, s.end }

// What an entry costs in host memory besides its key and value bytes: a
// slot of a Go map (a string and a slice header and a control byte) at the
// map's mean load, and the rounding of the key's and value's allocations
// to size classes. A timer's is a slot of a set and its entry in the timer
// queue, with the queue's room to grow. TestStateQuotaBoundsTheHeap
// measures it: a quota filled with 8-byte keys holds 0.8 to 1.0 times the
// quota in heap (it held 7 times before entries paid for their slots).
const (
	entryOverheadBytes = 96
	timerOverheadBytes = 96
)

// entryCost is what a keyed or operator state entry with a composite key of
// k bytes and a value of v bytes costs against the state limit.
func entryCost(k, v int) int64 { return int64(k + v + entryOverheadBytes) }

// timerCost is what a timer with a timer key of tk bytes costs.
func timerCost(tk int) int64 { return int64(tk + timerOverheadBytes) }

func (s *State) limitErr(would, limit int64) error {
	return fmt.Errorf("%w: state would grow to %d bytes (keys and values, plus %d bytes of host memory per entry), above the limit of %d",
		errStateLimit, would, entryOverheadBytes, limit)
}

// size returns what the entries of s cost against its limit.
func (s *State) size() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.bytes
}

// appendStateKey appends the map key of keyed state: u32 vertex, u16 name
// length, name, key. Entries of one (vertex, name) share a prefix.
func appendStateKey(dst []byte, vertex uint32, name, key []byte) []byte {
	dst = binary.LittleEndian.AppendUint32(dst, vertex)
	dst = binary.LittleEndian.AppendUint16(dst, uint16(len(name)))
	dst = append(dst, name...)
	return append(dst, key...)
}

// eventTimerBit marks an event-time timer in the vertex field of its timer
// key: both kinds share the per-group sets, and so the snapshot format, the
// state limit and the redistribution on rescale; snapshots without event
// timers read as before. Vertex ids are below 1<<31 (jobgraph.Validate).
const eventTimerBit = 1 << 31

// isEventTimer reports whether timer key tk is an event-time timer.
func isEventTimer(tk string) bool {
	return binary.LittleEndian.Uint32([]byte(tk[:4]))&eventTimerBit != 0
}

// appendTimerKey appends the map key of a timer: u32 vertex, i64 time, key.
func appendTimerKey(dst []byte, vertex uint32, t int64, key []byte) []byte {
	dst = binary.LittleEndian.AppendUint32(dst, vertex)
	dst = binary.LittleEndian.AppendUint64(dst, uint64(t))
	return append(dst, key...)
}

func (s *State) group(key []byte) (int, error) {
	kg := keygroup.Of(key, s.maxP)
	if kg < s.start || kg > s.end {
		return 0, fmt.Errorf("key %q is in key group %d, which this subtask does not hold (%d..%d): records must reach keyed operators through a hash edge", truncate(key, 64), kg, s.start, s.end)
	}
	return kg - s.start, nil
}

func truncate(b []byte, n int) []byte {
	if len(b) > n {
		return b[:n]
	}
	return b
}

// get returns the value under composite key ck in key's group.
func (s *State) get(key, ck []byte) ([]byte, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	g, err := s.group(key)
	if err != nil {
		return nil, false, err
	}
	v, ok := s.kv(g, string(ck))
	return v, ok, nil
}

func (s *State) put(key, ck, val []byte, limit int64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	g, err := s.group(key)
	if err != nil {
		return err
	}
	old, ok := s.kv(g, string(ck))
	grow := entryCost(len(ck), len(val))
	if ok {
		grow -= entryCost(len(ck), len(old))
	}
	if limit > 0 && grow > 0 && s.bytes+grow > limit {
		return s.limitErr(s.bytes+grow, limit)
	}
	s.bytes += grow
	if ok && cap(old) >= len(val) && s.reusable(g, string(ck)) {
		// Reuse the old value's buffer: a reduce rewrites every key often.
		s.setKV(g, string(ck), append(old[:0], val...))
		return nil
	}
	s.setKV(g, string(ck), append([]byte(nil), val...))
	return nil
}

func (s *State) del(key, ck []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	g, err := s.group(key)
	if err != nil {
		return err
	}
	if old, ok := s.kv(g, string(ck)); ok {
		s.bytes -= entryCost(len(ck), len(old))
		s.delKV(g, string(ck))
	}
	return nil
}

// scanKeys returns the user keys under prefix (a stateKey without the key),
// sorted by key group then key, so scans are deterministic.
func (s *State) scanKeys(prefix []byte) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	match := func(k string) bool { return len(k) >= len(prefix) && k[:len(prefix)] == string(prefix) }
	for g, m := range s.groups {
		first := len(out)
		for k := range m {
			if match(k) {
				if _, overridden := s.deltaOf(g)[k]; !overridden {
					out = append(out, k)
				}
			}
		}
		for k, d := range s.deltaOf(g) {
			if match(k) && !d.gone {
				out = append(out, k)
			}
		}
		sort.Strings(out[first:])
	}
	return out
}

// deltaOf returns group g's writes since the freeze (nil when none).
func (s *State) deltaOf(g int) map[string]deltaValue {
	if s.delta == nil {
		return nil
	}
	return s.delta[g]
}

// lookup returns the value under a full composite key found by scanKeys.
func (s *State) lookup(ck string, userKey []byte) ([]byte, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	g := keygroup.Of(userKey, s.maxP) - s.start
	if g < 0 || g >= len(s.groups) {
		return nil, false
	}
	return s.kv(g, ck)
}

func (s *State) opGet(ck []byte) ([]byte, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	v, ok := s.ops[string(ck)]
	return v, ok
}

func (s *State) opPut(ck, val []byte, limit int64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	old, ok := s.ops[string(ck)]
	grow := entryCost(len(ck), len(val))
	if ok {
		grow -= entryCost(len(ck), len(old))
	}
	if limit > 0 && grow > 0 && s.bytes+grow > limit {
		return s.limitErr(s.bytes+grow, limit)
	}
	s.bytes += grow
	s.ops[string(ck)] = append([]byte(nil), val...)
	return nil
}

// PutHostEntry stores value as operator state of vertex under name, for
// the host's own use (a host connector's buffer): it is snapshotted and
// restored with the guest's state, and not counted against the state limit
// (the host bounds its own entries).
func (s *State) PutHostEntry(vertex int, name string, value []byte) {
	ck := string(appendStateKey(nil, uint32(vertex), []byte(name), nil))
	s.mu.Lock()
	defer s.mu.Unlock()
	if old, ok := s.ops[ck]; ok {
		s.bytes -= entryCost(len(ck), len(old))
	}
	s.ops[ck] = bytes.Clone(value)
	s.bytes += entryCost(len(ck), len(value))
}

// TakeHostEntries removes and returns vertex's operator-state entries whose
// names start with prefix (after a rescale, one subtask may hold several):
// shorter names first, names of one length in order, so "x-2" comes before
// "x-10".
func (s *State) TakeHostEntries(vertex int, prefix string) [][]byte {
	p := string(appendStateKey(nil, uint32(vertex), nil, nil))
	s.mu.Lock()
	defer s.mu.Unlock()
	var out [][]byte
	for _, ck := range sortedKeys(s.ops) {
		// The key is u32 vertex, u16 name length, name.
		if len(ck) < len(p) || ck[:4] != p[:4] || !strings.HasPrefix(ck[6:], prefix) {
			continue
		}
		out = append(out, s.ops[ck])
		s.bytes -= entryCost(len(ck), len(s.ops[ck]))
		delete(s.ops, ck)
	}
	return out
}

func (s *State) opDelete(ck []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if old, ok := s.ops[string(ck)]; ok {
		s.bytes -= entryCost(len(ck), len(old))
		delete(s.ops, string(ck))
	}
}

// timers

type timerEntry struct {
	t     int64
	group int
	tk    string // timerKey
}

type timerQueue []timerEntry

func (q timerQueue) Len() int { return len(q) }
func (q timerQueue) Less(i, j int) bool {
	if q[i].t != q[j].t {
		return q[i].t < q[j].t
	}
	return q[i].tk < q[j].tk
}
func (q timerQueue) Swap(i, j int) { q[i], q[j] = q[j], q[i] }
func (q *timerQueue) Push(x any)   { *q = append(*q, x.(timerEntry)) }
func (q *timerQueue) Pop() any {
	old := *q
	e := old[len(old)-1]
	*q = old[:len(old)-1]
	return e
}

func (s *State) registerTimer(vertex uint32, key []byte, t int64, limit int64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	g, err := s.group(key)
	if err != nil {
		return err
	}
	tk := string(appendTimerKey(nil, vertex, t, key))
	m := s.timers[g]
	if m == nil {
		m = make(map[string]struct{})
		s.timers[g] = m
	}
	if _, ok := m[tk]; ok {
		return nil
	}
	if limit > 0 && s.bytes+timerCost(len(tk)) > limit {
		return s.limitErr(s.bytes+timerCost(len(tk)), limit)
	}
	s.addTimer(g, tk, t)
	return nil
}

func (s *State) deleteTimer(vertex uint32, key []byte, t int64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	g, err := s.group(key)
	if err != nil {
		return err
	}
	tk := appendTimerKey(nil, vertex, t, key)
	if _, ok := s.timers[g][string(tk)]; ok {
		delete(s.timers[g], string(tk))
		s.bytes -= timerCost(len(tk))
		s.nTimers--
	}
	// The queue entry goes stale and is dropped when it reaches the top,
	// or when stale entries outnumber live ones (addTimer).
	return nil
}

// addTimer registers timer tk of group g at time t, which is not
// registered; caller holds mu.
func (s *State) addTimer(g int, tk string, t int64) {
	if s.timers[g] == nil {
		s.timers[g] = make(map[string]struct{})
	}
	s.timers[g][tk] = struct{}{}
	s.bytes += timerCost(len(tk))
	s.nTimers++
	q := &s.queue
	if isEventTimer(tk) {
		q = &s.equeue
	}
	heap.Push(q, timerEntry{t: t, group: g, tk: tk})
	if len(s.queue)+len(s.equeue) > 2*s.nTimers+1024 {
		// Deleted timers stay in the queue until they reach its top, out
		// of the limit's sight: a guest registering and deleting timers
		// far in the future would grow it without bound. Drop them, and
		// the duplicates a timer deleted and registered again leaves.
		s.compact(&s.queue)
		s.compact(&s.equeue)
	}
}

func (s *State) compact(q *timerQueue) {
	live := (*q)[:0]
	seen := make(map[string]bool, s.nTimers)
	for _, e := range *q {
		if _, ok := s.timers[e.group][e.tk]; ok && !seen[e.tk] {
			seen[e.tk] = true
			live = append(live, e)
		}
	}
	clear((*q)[len(live):])
	*q = live
	heap.Init(q)
}

// nextTimer returns the earliest registered processing-time timer's time.
func (s *State) nextTimer() (int64, bool) { return s.next(&s.queue) }

// nextEventTimer returns the earliest registered event-time timer's time.
func (s *State) nextEventTimer() (int64, bool) { return s.next(&s.equeue) }

func (s *State) next(q *timerQueue) (int64, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for len(*q) > 0 {
		e := (*q)[0]
		if _, ok := s.timers[e.group][e.tk]; ok {
			return e.t, true
		}
		heap.Pop(q)
	}
	return 0, false
}

// popDue removes and returns the processing-time timer keys due at now,
// earliest first.
func (s *State) popDue(now int64) []string { return s.pop(&s.queue, now) }

// popDueEvent removes and returns the event-time timer keys due at
// watermark wm, earliest first.
func (s *State) popDueEvent(wm int64) []string { return s.pop(&s.equeue, wm) }

func (s *State) pop(q *timerQueue, now int64) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var due []string
	for len(*q) > 0 && (*q)[0].t <= now {
		e := heap.Pop(q).(timerEntry)
		if _, ok := s.timers[e.group][e.tk]; ok {
			delete(s.timers[e.group], e.tk)
			s.bytes -= timerCost(len(e.tk))
			s.nTimers--
			due = append(due, e.tk)
		}
	}
	return due
}

// Snapshots work in two steps, so a task can take a checkpoint without
// stopping for the encoding: Freeze captures the state consistently in
// O(key groups) (copy-on-write, as Flink's heap state backend), and the
// Frozen copy encodes later (internal/statecodec), on any goroutine, while
// the task goes on changing the State.

// errStateLimit marks a put refused for Limits.MaxStateBytes.
var errStateLimit = errors.New("state limit")

// ErrBadSnapshot is returned by Restore for bytes that are not a snapshot of
// compatible state.
var ErrBadSnapshot = errors.New("bad state snapshot")

// snapshot writes s to w in a self-describing binary format that Restore
// reads back, also into State for other key-group ranges.
func (s *State) snapshot(w io.Writer) error {
	f := s.Freeze()
	defer f.Release()
	_, err := w.Write(f.AppendTo(nil))
	return err
}

// Frozen is a consistent copy of a State taken by Freeze: the snapshot of
// that moment, to encode with AppendTo.
type Frozen struct {
	s                *State
	maxP, start, end int
	ops              []entry
	timers           [][]string // per group
	// base is set when the Frozen holds the keyed maps themselves (the
	// State writes to its delta meanwhile); else groups holds the entries.
	base     []map[string][]byte
	groups   [][]entry
	released bool
}

type entry struct {
	k string
	v []byte
}

// Freeze captures the State for a later AppendTo, without copying bytes:
// the first Frozen outstanding takes the keyed maps themselves, in O(key
// groups) (writes go to a delta until Release); one taken while another is
// outstanding copies the entries' keys and value slices. Release the copy
// once written.
func (s *State) Freeze() *Frozen {
	s.mu.Lock()
	defer s.mu.Unlock()
	f := &Frozen{s: s, maxP: s.maxP, start: s.start, end: s.end, timers: make([][]string, len(s.timers))}
	for k, v := range s.ops {
		f.ops = append(f.ops, entry{k: k, v: v})
	}
	for g, m := range s.timers {
		for k := range m {
			f.timers[g] = append(f.timers[g], k)
		}
	}
	if s.layered == nil {
		f.base = slices.Clone(s.groups)
		s.delta = make([]map[string]deltaValue, len(s.groups))
		s.layered = f
		return f
	}
	s.copies++
	f.groups = make([][]entry, len(s.groups))
	for g, m := range s.groups {
		d := s.delta[g]
		for k, v := range m {
			if _, overridden := d[k]; !overridden {
				f.groups[g] = append(f.groups[g], entry{k: k, v: v})
			}
		}
		for k, dv := range d {
			if !dv.gone {
				f.groups[g] = append(f.groups[g], entry{k: k, v: dv.v})
			}
		}
	}
	return f
}

// Release ends the copy. When it holds the keyed maps, the writes made
// meanwhile are folded back into them (a pause as long as there were
// writes). It is idempotent.
func (f *Frozen) Release() {
	s := f.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if f.released {
		return
	}
	f.released = true
	if s.layered != f {
		s.copies--
		return
	}
	for g, d := range s.delta {
		for k, dv := range d {
			switch {
			case dv.gone:
				delete(s.groups[g], k)
			case s.groups[g] == nil:
				s.groups[g] = map[string][]byte{k: dv.v}
			default:
				s.groups[g][k] = dv.v
			}
		}
	}
	s.delta, s.layered = nil, nil
}

// AppendTo appends the copy's snapshot bytes to dst: a caller that keeps
// its buffer from one checkpoint to the next allocates nothing.
func (f *Frozen) AppendTo(dst []byte) []byte {
	e := statecodec.NewEncoder(dst, f.maxP, f.start, f.end)
	e.Ops(len(f.ops))
	for _, en := range f.ops {
		e.Entry(en.k, en.v)
	}
	for g, tks := range f.timers {
		var n int
		if f.base != nil {
			n = len(f.base[g])
		} else {
			n = len(f.groups[g])
		}
		if n == 0 && len(tks) == 0 {
			continue
		}
		e.Group(f.start+g, n)
		if f.base != nil {
			// Straight from the maps the Frozen holds: no copy of the
			// entries.
			for k, v := range f.base[g] {
				e.Entry(k, v)
			}
		} else {
			for _, en := range f.groups[g] {
				e.Entry(en.k, en.v)
			}
		}
		e.Timers(len(tks))
		for _, k := range tks {
			e.Timer(k)
		}
	}
	return e.Finish()
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// Restore merges a snapshot into s: the key groups of the snapshot that s
// holds (others are skipped, so a rescaled subtask restores from every
// snapshot that overlaps its range), and the snapshot's operator state when
// s holds the snapshot's first key group. So at the same parallelism every
// subtask gets its own operator state back, and after a rescale each old
// subtask's operator state goes to exactly one new subtask, never to two
// (names that collide when several land on one subtask: the last restored
// wins).
//
// # Errors
//
// ErrBadSnapshot when r is not a snapshot, is corrupt, or was taken with a
// different max parallelism (key groups cannot be split).
func (s *State) Restore(r io.Reader) error {
	b, err := io.ReadAll(r)
	if err != nil {
		return fmt.Errorf("restore state: %w", err)
	}
	// Decoded fully before s changes, so a bad snapshot changes nothing.
	snap, err := statecodec.Decode(b, s.maxP)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrBadSnapshot, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if snap.Start >= s.start && snap.Start <= s.end {
		for _, e := range snap.Ops {
			if old, ok := s.ops[string(e.Key)]; ok {
				s.bytes -= entryCost(len(e.Key), len(old))
			}
			s.ops[string(e.Key)] = bytes.Clone(e.Value)
			s.bytes += entryCost(len(e.Key), len(e.Value))
		}
	}
	for _, gr := range snap.Groups {
		if gr.KeyGroup < s.start || gr.KeyGroup > s.end {
			continue
		}
		i := gr.KeyGroup - s.start
		if s.groups[i] == nil && s.delta == nil {
			s.groups[i] = make(map[string][]byte, len(gr.Entries))
		}
		for _, e := range gr.Entries {
			if old, ok := s.kv(i, string(e.Key)); ok {
				s.bytes -= entryCost(len(e.Key), len(old))
			}
			s.setKV(i, string(e.Key), bytes.Clone(e.Value))
			s.bytes += entryCost(len(e.Key), len(e.Value))
		}
		if s.timers[i] == nil && len(gr.Timers) > 0 {
			s.timers[i] = make(map[string]struct{}, len(gr.Timers))
		}
		for _, tk := range gr.Timers {
			if _, ok := s.timers[i][string(tk)]; ok {
				continue
			}
			s.addTimer(i, string(tk), int64(binary.LittleEndian.Uint64(tk[4:12])))
		}
	}
	return nil
}
