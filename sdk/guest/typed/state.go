package typed

import (
	"bytes"
	"fmt"
)

// KeyedState is the byte-level keyed state of the current key: what
// *guest.KeyedContext and *KeyedContext provide, and what the typed keyed
// state types read and write through.
type KeyedState interface {
	Get(name string) ([]byte, bool)
	Put(name string, v []byte)
	Delete(name string)
}

// OperatorStates is the byte-level operator state of a subtask: what
// *guest.Context (and so every operator's context) provides.
type OperatorStates interface {
	OperatorState(name string) ([]byte, bool)
	SetOperatorState(name string, v []byte)
	DeleteOperatorState(name string)
}

// ValueState is one value of type T per key, Flink's ValueState: declare it
// once (at plan time, next to the operator that uses it) and read and
// write it in the operator's functions with their context.
type ValueState[T any] struct {
	name string
	c    Codec[T]
	buf  []byte
}

// NewValueState declares keyed state name, holding a T encoded with c.
// Names are per operator: two operators may use the same one.
func NewValueState[T any](name string, c Codec[T]) *ValueState[T] {
	return &ValueState[T]{name: name, c: c}
}

// Value returns the current key's value and whether it has one; the zero
// value when it has none. A string or []byte value aliases the state buffer:
// valid until the next state call.
//
// # Errors
//
// The codec's, when the stored bytes do not decode (state written with
// another codec).
func (s *ValueState[T]) Value(ctx KeyedState) (T, bool, error) {
	b, ok := ctx.Get(s.name)
	if !ok {
		var zero T
		return zero, false, nil
	}
	v, err := s.c.Decode(b)
	if err != nil {
		return v, false, fmt.Errorf("value state %q: %w", s.name, err)
	}
	return v, true, nil
}

// Update stores v as the current key's value.
func (s *ValueState[T]) Update(ctx KeyedState, v T) {
	s.buf = s.c.Append(s.buf[:0], v)
	ctx.Put(s.name, s.buf)
}

// Clear removes the current key's value.
func (s *ValueState[T]) Clear(ctx KeyedState) { ctx.Delete(s.name) }

// ListState is a list of T per key, Flink's ListState. The list is one
// state entry: reading it decodes the whole list, and Add rewrites it, so it
// suits lists of up to a few thousand elements per key.
type ListState[T any] struct {
	name string
	c    Codec[T]
	buf  []byte
}

// NewListState declares keyed state name, a list of T encoded with c.
func NewListState[T any](name string, c Codec[T]) *ListState[T] {
	return &ListState[T]{name: name, c: c}
}

// Get returns the current key's list (nil when it has none).
//
// # Errors
//
// ErrMalformed (wrapped), or the element codec's, when the stored bytes
// do not decode.
func (s *ListState[T]) Get(ctx KeyedState) ([]T, error) {
	var out []T
	err := s.each(ctx, func(v T) bool { out = append(out, v); return true })
	return out, err
}

// All calls fn with each element of the current key's list, in order,
// until fn returns false, without building a slice. Elements of strings or
// bytes alias the state buffer: valid until the next state call.
//
// # Errors
//
// As Get.
func (s *ListState[T]) All(ctx KeyedState, fn func(v T) bool) error { return s.each(ctx, fn) }

func (s *ListState[T]) each(ctx KeyedState, fn func(v T) bool) error {
	b, ok := ctx.Get(s.name)
	if !ok {
		return nil
	}
	for i := 0; len(b) > 0; i++ {
		part, rest, err := field(s.c, b, "list element")
		if err != nil {
			return fmt.Errorf("list state %q: %w", s.name, err)
		}
		v, err := s.c.Decode(part)
		if err != nil {
			return fmt.Errorf("list state %q: element %d: %w", s.name, i, err)
		}
		if !fn(v) {
			return nil
		}
		b = rest
	}
	return nil
}

// Add appends v to the current key's list.
func (s *ListState[T]) Add(ctx KeyedState, v T) {
	old, _ := ctx.Get(s.name)
	s.buf = appendField(append(s.buf[:0], old...), s.c, v)
	ctx.Put(s.name, s.buf)
}

// Update replaces the current key's list with vs (an empty vs clears it).
func (s *ListState[T]) Update(ctx KeyedState, vs []T) {
	if len(vs) == 0 {
		ctx.Delete(s.name)
		return
	}
	s.buf = s.buf[:0]
	for _, v := range vs {
		s.buf = appendField(s.buf, s.c, v)
	}
	ctx.Put(s.name, s.buf)
}

// Clear removes the current key's list.
func (s *ListState[T]) Clear(ctx KeyedState) { ctx.Delete(s.name) }

// MapState is a map from K to V per key, Flink's MapState. The map is one
// state entry, its entries in the order they were first put: Get and
// Contains scan it without decoding the values they skip, Put and Remove
// rewrite it. It suits maps of up to a few thousand entries per key; for
// more, key the stream by (key, map key) and use a ValueState.
type MapState[K, V any] struct {
	name string
	k    Codec[K]
	v    Codec[V]
	kbuf []byte
	buf  []byte
}

// NewMapState declares keyed state name, a map of K to V encoded with k
// and v. Two map keys are the same when their encodings are equal.
func NewMapState[K, V any](name string, k Codec[K], v Codec[V]) *MapState[K, V] {
	return &MapState[K, V]{name: name, k: k, v: v}
}

// find returns the byte range [start, end) of mk's entry in b, and of its
// value; start is -1 when there is none.
func (s *MapState[K, V]) find(b, mk []byte) (start, end int, val []byte, err error) {
	off := 0
	for off < len(b) {
		kp, rest, err := field(s.k, b[off:], "map key")
		if err != nil {
			return -1, 0, nil, err
		}
		vp, rest, err := field(s.v, rest, "map value")
		if err != nil {
			return -1, 0, nil, err
		}
		next := len(b) - len(rest)
		if bytes.Equal(kp, mk) {
			return off, next, vp, nil
		}
		off = next
	}
	return -1, 0, nil, nil
}

// load returns the current key's map bytes and the entry of map key mk.
func (s *MapState[K, V]) load(ctx KeyedState, mk K) (b []byte, start, end int, val []byte, err error) {
	b, _ = ctx.Get(s.name)
	s.kbuf = s.k.Append(s.kbuf[:0], mk)
	start, end, val, err = s.find(b, s.kbuf)
	if err != nil {
		err = fmt.Errorf("map state %q: %w", s.name, err)
	}
	return b, start, end, val, err
}

// Get returns the value of map key mk for the current key, and whether
// there is one.
//
// # Errors
//
// ErrMalformed (wrapped), or a codec's, when the stored bytes do not decode.
func (s *MapState[K, V]) Get(ctx KeyedState, mk K) (V, bool, error) {
	var zero V
	_, start, _, val, err := s.load(ctx, mk)
	if err != nil || start < 0 {
		return zero, false, err
	}
	v, err := s.v.Decode(val)
	if err != nil {
		return zero, false, fmt.Errorf("map state %q: value: %w", s.name, err)
	}
	return v, true, nil
}

// Contains reports whether the current key's map has map key mk.
//
// # Errors
//
// As Get.
func (s *MapState[K, V]) Contains(ctx KeyedState, mk K) (bool, error) {
	_, start, _, _, err := s.load(ctx, mk)
	return start >= 0, err
}

// Put sets map key mk to v in the current key's map.
//
// # Errors
//
// As Get: a map that does not decode is left as it is.
func (s *MapState[K, V]) Put(ctx KeyedState, mk K, v V) error {
	b, start, end, _, err := s.load(ctx, mk)
	if err != nil {
		return err
	}
	s.buf = s.buf[:0]
	if start >= 0 {
		s.buf = append(s.buf, b[:start]...)
	} else {
		s.buf = append(s.buf, b...)
	}
	s.buf = appendField(s.buf, s.k, mk)
	s.buf = appendField(s.buf, s.v, v)
	if start >= 0 {
		s.buf = append(s.buf, b[end:]...)
	}
	ctx.Put(s.name, s.buf)
	return nil
}

// Remove deletes map key mk from the current key's map.
//
// # Errors
//
// As Put.
func (s *MapState[K, V]) Remove(ctx KeyedState, mk K) error {
	b, start, end, _, err := s.load(ctx, mk)
	if err != nil || start < 0 {
		return err
	}
	if start == 0 && end == len(b) {
		ctx.Delete(s.name)
		return nil
	}
	s.buf = append(append(s.buf[:0], b[:start]...), b[end:]...)
	ctx.Put(s.name, s.buf)
	return nil
}

// All calls fn with each entry of the current key's map, in the order they
// were first put, until fn returns false. Keys and values of strings or
// bytes alias the state buffer: valid until the next state call.
//
// # Errors
//
// As Get.
func (s *MapState[K, V]) All(ctx KeyedState, fn func(k K, v V) bool) error {
	b, _ := ctx.Get(s.name)
	for len(b) > 0 {
		kp, rest, err := field(s.k, b, "map key")
		if err != nil {
			return fmt.Errorf("map state %q: %w", s.name, err)
		}
		vp, rest, err := field(s.v, rest, "map value")
		if err != nil {
			return fmt.Errorf("map state %q: %w", s.name, err)
		}
		k, err := s.k.Decode(kp)
		if err != nil {
			return fmt.Errorf("map state %q: key: %w", s.name, err)
		}
		v, err := s.v.Decode(vp)
		if err != nil {
			return fmt.Errorf("map state %q: value: %w", s.name, err)
		}
		if !fn(k, v) {
			return nil
		}
		b = rest
	}
	return nil
}

// Len returns the number of entries in the current key's map.
//
// # Errors
//
// As Get.
func (s *MapState[K, V]) Len(ctx KeyedState) (int, error) {
	n := 0
	err := s.All(ctx, func(K, V) bool { n++; return true })
	return n, err
}

// Clear removes the current key's map.
func (s *MapState[K, V]) Clear(ctx KeyedState) { ctx.Delete(s.name) }

// OperatorState is a value of type T per subtask of an operator, such as a
// source's position: it survives failures and savepoints, and after a
// rescale each old subtask's value goes to exactly one new subtask
// (docs/ABI.md).
type OperatorState[T any] struct {
	name string
	c    Codec[T]
	buf  []byte
}

// NewOperatorState declares operator state name, holding a T encoded with c.
func NewOperatorState[T any](name string, c Codec[T]) *OperatorState[T] {
	return &OperatorState[T]{name: name, c: c}
}

// Get returns the subtask's value and whether it has one.
//
// # Errors
//
// The codec's, when the stored bytes do not decode.
func (s *OperatorState[T]) Get(ctx OperatorStates) (T, bool, error) {
	b, ok := ctx.OperatorState(s.name)
	if !ok {
		var zero T
		return zero, false, nil
	}
	v, err := s.c.Decode(b)
	if err != nil {
		return v, false, fmt.Errorf("operator state %q: %w", s.name, err)
	}
	return v, true, nil
}

// Set stores v as the subtask's value.
func (s *OperatorState[T]) Set(ctx OperatorStates, v T) {
	s.buf = s.c.Append(s.buf[:0], v)
	ctx.SetOperatorState(s.name, s.buf)
}

// Clear removes the subtask's value.
func (s *OperatorState[T]) Clear(ctx OperatorStates) { ctx.DeleteOperatorState(s.name) }
