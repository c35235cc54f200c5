package wasmhost

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// The methods in this file are the state half of the ABI (docs/ABI.md,
// section 4) for a host that is not a wazero instance: the job test
// harness (sdk/guest/jobtest) runs the Go SDK natively over a State, so
// that its keyed state, key groups, state limit, timers and snapshots are
// those of this store, not a copy of them. Tests also use them to look at
// what a task's state holds.

// Get returns vertex's keyed state name of key and whether it exists. The
// value belongs to s: do not modify it, and copy it to keep it past the next
// write.
//
// # Errors
//
// An error when key is not in one of the key groups s holds.
func (s *State) Get(vertex int, name string, key []byte) ([]byte, bool, error) {
	v, ok, err := s.get(key, appendStateKey(nil, uint32(vertex), []byte(name), key))
	return v, ok, err
}

// Put sets vertex's keyed state name of key to a copy of value. limit is the
// most the entries of s may cost (Limits.MaxStateBytes); 0 means no limit.
//
// # Errors
//
// An error when key is not in one of the key groups s holds, or one
// matching ErrMemoryLimit when the put would take s past limit (nothing
// changes then).
func (s *State) Put(vertex int, name string, key, value []byte, limit int64) error {
	return limitCause(s.put(key, appendStateKey(nil, uint32(vertex), []byte(name), key), value, limit))
}

// Delete removes vertex's keyed state name of key, if it exists.
//
// # Errors
//
// An error when key is not in one of the key groups s holds.
func (s *State) Delete(vertex int, name string, key []byte) error {
	return s.del(key, appendStateKey(nil, uint32(vertex), []byte(name), key))
}

// Keys returns the keys that have vertex's keyed state name, in the order
// state_scan hands them out: by key group, then key.
func (s *State) Keys(vertex int, name string) [][]byte {
	prefix := appendStateKey(nil, uint32(vertex), []byte(name), nil)
	cks := s.scanKeys(prefix)
	out := make([][]byte, len(cks))
	for i, ck := range cks {
		out[i] = []byte(ck[len(prefix):])
	}
	return out
}

// OperatorState returns vertex's operator state name and whether it exists.
// The value belongs to s, as Get's does.
func (s *State) OperatorState(vertex int, name string) ([]byte, bool) {
	return s.opGet(appendStateKey(nil, uint32(vertex), []byte(name), nil))
}

// PutOperatorState sets vertex's operator state name to a copy of value,
// within limit as Put.
//
// # Errors
//
// One matching ErrMemoryLimit when the put would take s past limit.
func (s *State) PutOperatorState(vertex int, name string, value []byte, limit int64) error {
	return limitCause(s.opPut(appendStateKey(nil, uint32(vertex), []byte(name), nil), value, limit))
}

// DeleteOperatorState removes vertex's operator state name, if it exists.
func (s *State) DeleteOperatorState(vertex int, name string) {
	s.opDelete(appendStateKey(nil, uint32(vertex), []byte(name), nil))
}

// Timer is a processing-time timer of a keyed operator.
type Timer struct {
	Vertex int
	Key    []byte
	TimeMs int64
}

// RegisterTimer registers a timer of vertex for key at timeMs, within limit
// as Put; registering one that exists does nothing.
//
// # Errors
//
// An error when key is not in one of the key groups s holds, or one
// matching ErrMemoryLimit when the timer would take s past limit.
func (s *State) RegisterTimer(vertex int, key []byte, timeMs, limit int64) error {
	return limitCause(s.registerTimer(uint32(vertex), key, timeMs, limit))
}

// DeleteTimer removes a registered timer, if it exists.
//
// # Errors
//
// An error when key is not in one of the key groups s holds.
func (s *State) DeleteTimer(vertex int, key []byte, timeMs int64) error {
	return s.deleteTimer(uint32(vertex), key, timeMs)
}

// NextTimer returns the time of the earliest registered timer.
func (s *State) NextTimer() (timeMs int64, ok bool) { return s.nextTimer() }

// PopDueTimers removes and returns the timers due at nowMs (time ≤ nowMs),
// in the order sluice_timers hands them to the guest: by time (timers of
// one time in a fixed order).
func (s *State) PopDueTimers(nowMs int64) []Timer {
	return timersOf(s.popDue(nowMs))
}

// RegisterEventTimer registers an event-time timer of vertex for key at
// timeMs, as RegisterTimer does a processing-time one; the two kinds never
// meet.
//
// # Errors
//
// As RegisterTimer; also an error when vertex is not below 1<<31.
func (s *State) RegisterEventTimer(vertex int, key []byte, timeMs, limit int64) error {
	if vertex < 0 || vertex >= eventTimerBit {
		return fmt.Errorf("vertex %d out of range", vertex)
	}
	return limitCause(s.registerTimer(uint32(vertex)|eventTimerBit, key, timeMs, limit))
}

// DeleteEventTimer removes a registered event-time timer, if it exists.
//
// # Errors
//
// An error when key is not in one of the key groups s holds.
func (s *State) DeleteEventTimer(vertex int, key []byte, timeMs int64) error {
	return s.deleteTimer(uint32(vertex)|eventTimerBit, key, timeMs)
}

// NextEventTimer returns the time of the earliest registered event-time
// timer.
func (s *State) NextEventTimer() (timeMs int64, ok bool) { return s.nextEventTimer() }

// PopDueEventTimers removes and returns the event-time timers due at
// watermark wm (time ≤ wm), in the order sluice_event_timers hands them to
// the guest.
func (s *State) PopDueEventTimers(wm int64) []Timer { return timersOf(s.popDueEvent(wm)) }

func timersOf(due []string) []Timer {
	out := make([]Timer, len(due))
	for i, tk := range due {
		out[i] = Timer{
			Vertex: int(binary.LittleEndian.Uint32([]byte(tk[:4])) &^ eventTimerBit),
			TimeMs: int64(binary.LittleEndian.Uint64([]byte(tk[4:12]))),
			Key:    []byte(tk[12:]),
		}
	}
	return out
}

// limitCause makes a refusal for the state limit match ErrMemoryLimit, the
// cause the wazero host gives the trap it becomes.
func limitCause(err error) error {
	if err != nil && errors.Is(err, errStateLimit) {
		return fmt.Errorf("%w (%w)", err, ErrMemoryLimit)
	}
	return err
}
