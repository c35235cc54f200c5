package guest

import (
	"bytes"
	"encoding/binary"

	"github.com/sluicehq/sluice/internal/keygroup"
)

// accTable is the accumulator cache of a Reduce: key → accumulator, with a
// dirty mark for what keyed state has not seen yet. It is an open-addressing
// hash table over one byte arena rather than a Go map because, compiled to
// wasm, a Go map lookup costs about as much as the two host calls it
// replaces (and its pointers make every GC cycle scan it); this table holds
// no pointers and does one probe for most lookups.
type accTable struct {
	slots []uint32 // power-of-two size; 0 is empty, else an index into ents plus 1
	ents  []accEnt
	arena []byte   // keys and accumulators, back to back
	dirty []uint32 // indexes of dirty entries, in the order they became dirty
}

type accEnt struct {
	hash       uint32
	koff, klen uint32
	aoff, alen uint32
	acap       uint32
	present    bool // the key has an accumulator (it may be empty)
	dirty      bool
	stored     bool // keyed state has it (a window cache's entry)
}

const minAccSlots = 1 << 10

// find returns the index of key's entry, or -1 and the slot to insert it
// at, with its hash.
func (t *accTable) find(key []byte) (idx int, slot, h uint32) {
	h = keygroup.Hash(key)
	idx, slot = t.findHashed(key, h)
	return idx, slot, h
}

// findHashed is find with key's hash h (keygroup.Hash) already known.
func (t *accTable) findHashed(key []byte, h uint32) (idx int, slot uint32) {
	if t.slots == nil {
		t.slots = make([]uint32, minAccSlots)
	}
	mask := uint32(len(t.slots) - 1)
	for i := h & mask; ; i = (i + 1) & mask {
		s := t.slots[i]
		if s == 0 {
			return -1, i
		}
		e := &t.ents[s-1]
		if e.hash == h && e.klen == uint32(len(key)) && keyEqual(t.arena[e.koff:e.koff+e.klen], key) {
			return int(s - 1), i
		}
	}
}

// keyEqual is bytes.Equal for two keys of one length, with the 8-byte keys
// of integer ids compared inline (in Go's Wasm, bytes.Equal is a call to a
// byte loop).
func keyEqual(a, b []byte) bool {
	if len(a) == 8 && len(b) == 8 {
		return binary.LittleEndian.Uint64(a) == binary.LittleEndian.Uint64(b)
	}
	return bytes.Equal(a, b)
}

// insert adds key, absent from the table, at slot (from find), with no
// accumulator, and returns its index.
func (t *accTable) insert(key []byte, slot, h uint32) int {
	koff := uint32(len(t.arena))
	t.arena = append(t.arena, key...)
	t.ents = append(t.ents, accEnt{hash: h, koff: koff, klen: uint32(len(key))})
	t.slots[slot] = uint32(len(t.ents))
	if 2*len(t.ents) > len(t.slots) {
		t.grow()
	}
	return len(t.ents) - 1
}

func (t *accTable) grow() {
	slots := make([]uint32, 2*len(t.slots))
	mask := uint32(len(slots) - 1)
	for j := range t.ents {
		i := t.ents[j].hash & mask
		for slots[i] != 0 {
			i = (i + 1) & mask
		}
		slots[i] = uint32(j + 1)
	}
	t.slots = slots
}

// key returns entry i's key.
func (t *accTable) key(i int) []byte {
	e := &t.ents[i]
	return t.arena[e.koff : e.koff+e.klen : e.koff+e.klen]
}

// acc returns entry i's accumulator, nil when it has none. Its capacity
// ends at its own space, so appending to it never overwrites the arena.
func (t *accTable) acc(i int) []byte {
	e := &t.ents[i]
	if !e.present {
		return nil
	}
	return t.arena[e.aoff : e.aoff+e.alen : e.aoff+e.acap]
}

// set stores v as entry i's accumulator. v may alias the entry's current
// accumulator.
func (t *accTable) set(i int, v []byte) {
	e := &t.ents[i]
	if uint32(len(v)) <= e.acap {
		copy(t.arena[e.aoff:e.aoff+e.acap], v)
	} else {
		// A new place at the end; the old one is garbage until the table
		// is reset. If v aliases the arena and append moves it, v still
		// points at the old array, which it keeps alive.
		c := max(uint32(len(v)), 8)
		e.aoff = uint32(len(t.arena))
		e.acap = c
		t.arena = append(t.arena, v...)
		t.arena = append(t.arena, make([]byte, int(c)-len(v))...)
	}
	e.alen = uint32(len(v))
	e.present = true
	if !e.dirty {
		e.dirty = true
		t.dirty = append(t.dirty, uint32(i))
	}
}

// load sets entry i's accumulator to v, as read from keyed state: present
// and not dirty.
func (t *accTable) load(i int, v []byte) {
	t.set(i, v)
	t.ents[i].dirty = false
	t.dirty = t.dirty[:len(t.dirty)-1]
}

// size is about how many bytes the table holds.
func (t *accTable) size() int {
	return len(t.arena) + 4*len(t.slots) + 32*len(t.ents) + 4*len(t.dirty)
}

// len is the number of keys.
func (t *accTable) len() int { return len(t.ents) }

// reset empties the table, keeping its memory.
func (t *accTable) reset() {
	clear(t.slots)
	t.ents = t.ents[:0]
	t.arena = t.arena[:0]
	t.dirty = t.dirty[:0]
}
