package guest

import "encoding/binary"

// A window aggregate (Reduce or Aggregate on tumbling or sliding windows)
// keeps its windows' state entries in guest memory between barriers, as a
// Reduce keeps its accumulators (task.go): one accTable per window start,
// keyed by the record's key, holding the entry's bytes (flags and
// accumulator). A record then costs no state_get or state_put per window
// it falls in (two host calls each, and, for a sliding window, size/slide
// windows a record), only a table lookup. What changed since the last
// barrier is written back with state_put_batch, one batch per window
// start, before the operators' barrier hooks, so the host's snapshot
// holds it. A window that fires is deleted from its table, and from keyed
// state if it was written there; a table with no entry left is dropped
// once its window's state is past its lifetime, so the tables are the
// open windows. Windows that keep records (a window process function, a
// join) and sessions use keyed state directly.
//
// Keyed state can hold entries a table lacks only when the task was
// restored or the tables were emptied: when a table is created, a scan of
// its window's state tells (as a Reduce's stateMayHold does), and then a
// key's first lookup reads keyed state.
type windowCache struct {
	tables  []*windowTable
	recent  [16]*windowTable // tables by start, as windowNames: most lookups
	entries int              // over all tables
	evicted bool             // emptied once (past the bounds): keyed state may hold anything
	scan    []byte
	batch   []byte
}

type windowTable struct {
	start   int64
	name    string // its keyed state's name, windowState(start)
	t       accTable
	mayHold bool // keyed state may hold entries the table lacks
	live    int  // entries present
}

// winRef is where a window's state entry is: entry i of a table, or (tab
// nil) keyed state under name.
type winRef struct {
	tab  *windowTable
	i    int
	name string
}

// cached reports whether the operator's windows go through the cache.
func (wo *windowOp) cached() bool { return wo.process == nil && wo.w.kind != windowSession }

// table returns the table of the windows starting at start, creating it
// when create is set (nil otherwise).
func (wo *windowOp) table(start int64, create bool) *windowTable {
	c := &wo.cache
	r := &c.recent[uint64(start/wo.w.slide)%uint64(len(c.recent))]
	if *r != nil && (*r).start == start {
		return *r
	}
	for _, tab := range c.tables {
		if tab.start == start {
			*r = tab
			return tab
		}
	}
	if !create {
		return nil
	}
	tab := &windowTable{start: start, name: wo.names.name(start, wo.w.slide)}
	tab.mayHold = c.evicted || !keyedStateEmpty(int32(wo.op.id), tab.name, &c.scan)
	c.tables = append(c.tables, tab)
	*r = tab
	return tab
}

// get returns the current key's state entry of the window starting at
// start and whether it exists; h is the key's keygroup.Hash (a record's
// windows share it). For a record (add set) the entry gets a place in the
// cache; a timer's lookup (add unset) does not make one. The bytes are
// valid until the next state call or put.
func (wo *windowOp) get(ctx *KeyedContext, start int64, h uint32, add bool) (winRef, []byte, bool) {
	name := wo.names.name(start, wo.w.slide)
	if !wo.cached() {
		v, ok := ctx.Get(name)
		return winRef{name: name}, v, ok
	}
	tab := wo.table(start, add)
	if tab == nil {
		v, ok := ctx.Get(name)
		return winRef{name: name}, v, ok
	}
	i, slot := tab.t.findHashed(ctx.key, h)
	if i < 0 {
		if !add {
			if tab.mayHold {
				v, ok := ctx.Get(name)
				return winRef{name: name}, v, ok
			}
			return winRef{name: name}, nil, false
		}
		i = tab.t.insert(ctx.key, slot, h)
		wo.cache.entries++
		if tab.mayHold {
			if v, ok := ctx.Get(name); ok {
				tab.t.load(i, v)
				tab.t.ents[i].stored = true
				tab.live++
			}
		}
	}
	ref := winRef{tab: tab, i: i, name: name}
	v := tab.t.acc(i)
	return ref, v, v != nil
}

// put stores v as the entry ref names.
func (wo *windowOp) put(ctx *KeyedContext, ref winRef, v []byte) {
	if ref.tab == nil {
		ctx.Put(ref.name, v)
		return
	}
	if !ref.tab.t.ents[ref.i].present {
		ref.tab.live++
	}
	ref.tab.t.set(ref.i, v)
}

// del deletes the entry ref names.
func (wo *windowOp) del(ctx *KeyedContext, ref winRef) {
	if ref.tab == nil {
		ctx.Delete(ref.name)
		return
	}
	e := &ref.tab.t.ents[ref.i]
	if !e.present {
		return
	}
	e.present, e.alen = false, 0
	ref.tab.live--
	if e.stored {
		ctx.Delete(ref.name)
		e.stored = false
	}
}

// dropDone drops the tables with no entry left whose windows' state is
// past its lifetime at time t (their last timer was before t).
func (wo *windowOp) dropDone(t int64) {
	c := &wo.cache
	kept := c.tables[:0]
	for _, tab := range c.tables {
		w := Window{tab.start, tab.start + wo.w.size}
		if tab.live == 0 && (wo.w.procTime && w.MaxTimestamp() < t || !wo.w.procTime && wo.cleanup(w) < t) {
			c.entries -= tab.t.len()
			if r := &c.recent[uint64(tab.start/wo.w.slide)%uint64(len(c.recent))]; *r == tab {
				*r = nil
			}
			continue
		}
		kept = append(kept, tab)
	}
	clear(c.tables[len(kept):])
	c.tables = kept
}

// flush writes the entries changed since the last flush to keyed state,
// and empties the cache when evict is set.
func (wo *windowOp) flush(evict bool) {
	c := &wo.cache
	for _, tab := range c.tables {
		t := &tab.t
		if len(t.dirty) == 0 {
			continue
		}
		c.batch = append(c.batch[:0], 0, 0, 0, 0)
		n := 0
		for _, i := range t.dirty {
			e := &t.ents[i]
			e.dirty = false
			if !e.present {
				continue // deleted since
			}
			e.stored = true
			c.batch = appendKeyValue(c.batch, t.key(int(i)), t.acc(int(i)))
			n++
			if len(c.batch) >= putBatchBytes {
				c.putBatch(wo.op.id, tab.name, n)
				n = 0
			}
		}
		if n > 0 {
			c.putBatch(wo.op.id, tab.name, n)
		}
		t.dirty = t.dirty[:0]
	}
	if evict {
		clear(c.recent[:])
		clear(c.tables)
		c.tables, c.entries, c.evicted = c.tables[:0], 0, true
	}
}

func (c *windowCache) putBatch(vertex int, name string, n int) {
	binary.LittleEndian.PutUint32(c.batch, uint32(n))
	hostStatePutBatch(int32(vertex), name, c.batch)
	c.batch = c.batch[:4]
}

// bound empties the cache (after writing it back) once it outgrows the
// Reduce cache's bounds.
func (wo *windowOp) bound() {
	c := &wo.cache
	if c.entries < reduceCacheEntries {
		size := 0
		for _, tab := range c.tables {
			size += tab.t.size()
		}
		if size < reduceCacheBytes {
			return
		}
	}
	wo.flush(true)
}
