package wasmhost

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/sluicehq/sluice/internal/abi"
	"github.com/tetratelabs/wazero/api"
)

// Deadlines work like Wasmtime's epoch interruption with fuel: before
// compiling, the host adds two mutable i32 globals to the module, $interrupt
// and $fuel, and at every function entry and loop header the instructions
//
//	$fuel -= 1
//	if $fuel == 0 {
//	    $fuel = fuelInterval
//	    drop(memory.grow(0))           ;; comes back to Go: see below
//	    if $interrupt { unreachable }
//	}
//
// A timer sets $interrupt when a call's deadline passes; the guest traps
// within fuelInterval loop iterations or calls, and the host reports
// ErrDeadline.
//
// The memory.grow(0) matters as much as the flag. Go cannot preempt compiled
// Wasm, so a guest that never leaves it blocks every stop-the-world (a garbage
// collection) of the whole process — and with the world stopping, the
// deadline timer never runs either: one spinning guest froze the TaskManager.
// wazero runs memory.grow in Go, where the goroutine can be preempted, so the
// world can stop every fuelInterval iterations at the latest.
//
// wazero's own mechanism (WithCloseOnContextDone) leaves compiled code for Go
// at every loop iteration, which made Go guests 10 to 40 times slower; this
// costs a decrement and a branch, and a trip to Go every fuelInterval checks.
// It also lets the host pause the deadline while the guest waits on it (emit
// under back-pressure).

// interruptExport names the added $interrupt global in the instrumented module.
const interruptExport = "sluice:interrupt"

// fuelInterval is how many checks a guest runs between trips to Go. A trip
// costs about as much as a few hundred checks; 1<<14 keeps it under 0.1% and
// lets the world stop within well under a millisecond of guest time.
const fuelInterval = 1 << 14

// instrument returns wasm with the interrupt global and checks added. It
// decodes every instruction, so it also rejects what it cannot parse; it
// does not otherwise validate (wazero does, after).
func instrument(wasm []byte) ([]byte, error) {
	if err := checkHeader(wasm); err != nil {
		return nil, err
	}
	if err := checkStructure(wasm); err != nil {
		return nil, &structureError{err}
	}
	type sec struct {
		id   byte
		body []byte
	}
	var secs []sec
	r := &reader{b: wasm[8:]}
	for len(r.b) > 0 {
		id := r.byte()
		body := r.bytes(r.u32())
		if r.err != nil {
			return nil, fmt.Errorf("section %d: %w", id, r.err)
		}
		secs = append(secs, sec{id, body})
	}
	var importedGlobals, definedGlobals uint32
	hasMemory := false
	for _, s := range secs {
		switch s.id {
		case 2:
			ims, err := parseImportSection(s.body)
			if err != nil {
				return nil, err
			}
			for _, im := range ims {
				switch im.kind {
				case importGlobal:
					importedGlobals++
				case importMemory:
					hasMemory = true
				}
			}
		case 5:
			mr := &reader{b: s.body}
			hasMemory = hasMemory || mr.u32() > 0
		case 6:
			gr := &reader{b: s.body}
			definedGlobals = gr.u32()
			if gr.err != nil {
				return nil, fmt.Errorf("global section: %w", gr.err)
			}
		case 8:
			return nil, errors.New("module has a start function: export it as _initialize instead")
		case 7:
			if exportsName(s.body, interruptExport) {
				return nil, fmt.Errorf("export name %q is reserved", interruptExport)
			}
		}
	}
	if !hasMemory {
		// The fuel check needs memory.grow, and the ABI needs a memory anyway.
		return nil, fmt.Errorf("module has no linear memory: the guest must export its memory as %q", abi.ExportMemory)
	}
	g := importedGlobals + definedGlobals // $interrupt; $fuel is g+1
	check := fuelCheck(g, g+1)
	newGlobal := []byte{0x7f, 0x01, 0x41, 0x00, 0x0b} // $interrupt: mut i32 = i32.const 0
	newGlobal = append(append(newGlobal, 0x7f, 0x01, 0x41), uleb32(nil, fuelInterval)...)
	newGlobal = append(newGlobal, 0x0b) // $fuel: mut i32 = i32.const fuelInterval
	newExport := append(uleb32(nil, uint32(len(interruptExport))), interruptExport...)
	newExport = uleb32(append(newExport, 0x03), g)

	out := append([]byte(nil), wasmMagic...)
	emit := func(id byte, body []byte) {
		out = append(out, id)
		out = uleb32(out, uint32(len(body)))
		out = append(out, body...)
	}
	// Section order: 1 type, 2 import, 3 function, 4 table, 5 memory,
	// 13 tag, 6 global, 7 export, 8 start, 9 element, 12 data count,
	// 10 code, 11 data; custom sections (0) anywhere.
	order := map[byte]int{1: 1, 2: 2, 3: 3, 4: 4, 5: 5, 13: 6, 6: 7, 7: 8, 8: 9, 9: 10, 12: 11, 10: 12, 11: 13}
	addedGlobal, addedExport := false, false
	flush := func(before int) {
		if !addedGlobal && before > order[6] {
			emit(6, append(uleb32(nil, 2), newGlobal...))
			addedGlobal = true
		}
		if !addedExport && before > order[7] {
			emit(7, append(uleb32(nil, 1), newExport...))
			addedExport = true
		}
	}
	for _, s := range secs {
		if s.id != 0 {
			flush(order[s.id])
		}
		switch s.id {
		case 0:
			// DWARF refers to code offsets, which change: drop it.
			if n, ok := customName(s.body); ok && len(n) > 7 && n[:7] == ".debug_" {
				continue
			}
			emit(0, s.body)
		case 6:
			gr := &reader{b: s.body}
			n := gr.u32()
			emit(6, append(uleb32(nil, n+2), append(append([]byte(nil), gr.b...), newGlobal...)...))
			addedGlobal = true
		case 7:
			er := &reader{b: s.body}
			n := er.u32()
			emit(7, append(uleb32(nil, n+1), append(append([]byte(nil), er.b...), newExport...)...))
			addedExport = true
		case 4:
			tables, err := capTables(s.body)
			if err != nil {
				return nil, &structureError{err}
			}
			emit(4, tables)
		case 10:
			code, err := instrumentCode(s.body, check, g)
			if err != nil {
				return nil, err
			}
			emit(10, code)
		default:
			emit(s.id, s.body)
		}
	}
	flush(1 << 30)
	return out, nil
}

// fuelCheck returns the instructions placed at every function entry and loop
// header (see the comment at the top of this file). fuelInterval is positive
// and below 2^20, so its unsigned LEB128 is also the signed one i32.const wants.
func fuelCheck(interrupt, fuel uint32) []byte {
	c := uleb32([]byte{0x23}, fuel)                // global.get $fuel
	c = append(c, 0x41, 0x01, 0x6b)                // i32.const 1; i32.sub
	c = uleb32(append(c, 0x24), fuel)              // global.set $fuel
	c = uleb32(append(c, 0x23), fuel)              // global.get $fuel
	c = append(c, 0x45, 0x04, 0x40, 0x41)          // i32.eqz; if; i32.const
	c = uleb32(c, fuelInterval)                    //   fuelInterval
	c = uleb32(append(c, 0x24), fuel)              //   global.set $fuel
	c = append(c, 0x41, 0x00, 0x40, 0x00, 0x1a)    // i32.const 0; memory.grow 0; drop
	c = uleb32(append(c, 0x23), interrupt)         // global.get $interrupt
	return append(c, 0x04, 0x40, 0x00, 0x0b, 0x0b) // if; unreachable; end; end
}

// structureError marks a module rejected before wazero may look at it.
type structureError struct{ err error }

func (e *structureError) Error() string { return e.err.Error() }

// maxTableElements bounds each table of an instance: wazero keeps tables in
// host memory, outside the instance's memory cap, so a table could otherwise
// grow to 2^27 entries (1 GiB).
const maxTableElements = 1 << 20

// capTables rewrites the table section so every table has a maximum of at
// most maxTableElements: table.grow beyond it fails (returns -1) in the guest.
func capTables(body []byte) ([]byte, error) {
	r := &reader{b: body}
	n := r.u32()
	out := uleb32(nil, n)
	for i := uint32(0); i < n && r.err == nil; i++ {
		reftype, flags := r.byte(), r.byte()
		min := r.u32()
		max := uint32(maxTableElements)
		if flags&1 != 0 {
			if m := r.u32(); m < max {
				max = m
			}
		}
		if r.err != nil {
			break
		}
		if flags&^1 != 0 {
			return nil, fmt.Errorf("table %d: unsupported limits flags %#x", i, flags)
		}
		if min > maxTableElements {
			return nil, fmt.Errorf("table %d starts with %d elements, more than %d", i, min, maxTableElements)
		}
		if max < min {
			max = min
		}
		out = append(out, reftype, 1)
		out = uleb32(uleb32(out, min), max)
	}
	if r.err != nil {
		return nil, fmt.Errorf("table section: %w", r.err)
	}
	return out, nil
}

func uleb32(dst []byte, v uint32) []byte { return uleb64(dst, uint64(v)) }

func uleb64(dst []byte, v uint64) []byte {
	for {
		c := byte(v & 0x7f)
		v >>= 7
		if v != 0 {
			dst = append(dst, c|0x80)
			continue
		}
		return append(dst, c)
	}
}

func customName(body []byte) (string, bool) {
	r := &reader{b: body}
	n := r.bytes(r.u32())
	return string(n), r.err == nil
}

func exportsName(body []byte, name string) bool {
	r := &reader{b: body}
	n := r.u32()
	for i := uint32(0); i < n && r.err == nil; i++ {
		if string(r.bytes(r.u32())) == name {
			return true
		}
		r.byte()
		r.u32()
	}
	return false
}

// instrumentCode rewrites the code section: the check goes at the start of
// every function body and after every loop's block type. Instructions that
// touch global g, which the guest's own code cannot have named, are refused.
func instrumentCode(body, check []byte, g uint32) ([]byte, error) {
	r := &reader{b: body}
	n := r.u32()
	out := uleb32(nil, n)
	var fn []byte
	for i := uint32(0); i < n; i++ {
		size := r.u32()
		b := r.bytes(size)
		if r.err != nil {
			return nil, fmt.Errorf("code section: function %d: %w", i, r.err)
		}
		fr := &reader{b: b}
		locals := fr.u32()
		var sum uint64
		for j := uint32(0); j < locals && fr.err == nil; j++ {
			sum += uint64(fr.u32())
			fr.byte()
		}
		if fr.err != nil {
			return nil, &structureError{fmt.Errorf("function %d: locals: %w", i, fr.err)}
		}
		if sum > maxLocals {
			return nil, &structureError{fmt.Errorf("function %d has %d locals, more than %d", i, sum, maxLocals)}
		}
		fn = append(fn[:0], b[:len(b)-len(fr.b)]...)
		fn = append(fn, check...)
		for len(fr.b) > 0 {
			start := fr.b
			op := fr.byte()
			if err := skipImmediates(fr, op, g); err != nil {
				return nil, fmt.Errorf("function %d: %w", i, err)
			}
			fn = append(fn, start[:len(start)-len(fr.b)]...)
			if op == 0x03 { // loop
				fn = append(fn, check...)
			}
		}
		out = uleb32(out, uint32(len(fn)))
		out = append(out, fn...)
	}
	if len(r.b) != 0 {
		return nil, errors.New("code section: trailing bytes")
	}
	return out, nil
}

// skipImmediates consumes the immediates of opcode op.
func skipImmediates(r *reader, op byte, g uint32) error {
	switch {
	case op == 0x02 || op == 0x03 || op == 0x04: // block, loop, if
		blockType(r)
	case op == 0x0c || op == 0x0d || op == 0x10 || op == 0x12 || op == 0xd2 || (op >= 0x20 && op <= 0x22) || op == 0x25 || op == 0x26:
		r.u32()
	case op == 0x23 || op == 0x24: // global.get, global.set
		if idx := r.u32(); r.err == nil && idx >= g {
			return fmt.Errorf("global index %d out of range", idx)
		}
	case op == 0x0e: // br_table
		n := r.u32()
		for i := uint32(0); i <= n && r.err == nil; i++ {
			r.u32()
		}
	case op == 0x11 || op == 0x13: // call_indirect, return_call_indirect
		r.u32()
		r.u32()
	case op == 0x1c: // select t*
		n := r.u32()
		r.bytes(n)
	case op >= 0x28 && op <= 0x3e:
		memarg(r)
	case op == 0x3f || op == 0x40:
		r.u32()
	case op == 0x41:
		r.u64() // s32
	case op == 0x42:
		r.u64() // s64
	case op == 0x43:
		r.bytes(4)
	case op == 0x44:
		r.bytes(8)
	case op == 0xd0: // ref.null t
		r.byte()
	case op == 0xfc:
		switch sub := r.u32(); {
		case sub <= 7:
		case sub == 8: // memory.init
			r.u32()
			r.u32()
		case sub == 9 || sub == 13 || sub == 15 || sub == 16 || sub == 17:
			r.u32()
		case sub == 10 || sub == 12 || sub == 14: // memory.copy, table.init, table.copy
			r.u32()
			r.u32()
		case sub == 11: // memory.fill
			r.u32()
		default:
			return fmt.Errorf("unsupported instruction 0xfc %d", sub)
		}
	case op == 0xfd:
		switch sub := r.u32(); {
		case sub <= 0x0b || sub == 0x5c || sub == 0x5d:
			memarg(r)
		case sub == 0x0c || sub == 0x0d:
			r.bytes(16)
		case sub >= 0x15 && sub <= 0x22:
			r.byte()
		case sub >= 0x54 && sub <= 0x5b:
			memarg(r)
			r.byte()
		case sub > 0xff:
			return fmt.Errorf("unsupported instruction 0xfd %d", sub)
		}
	case op == 0x00 || op == 0x01 || op == 0x05 || op == 0x0b || op == 0x0f || op == 0x1a || op == 0x1b || op == 0xd1:
	case op >= 0x45 && op <= 0xc4:
	default:
		return fmt.Errorf("unsupported instruction %#x", op)
	}
	return r.err
}

func blockType(r *reader) {
	if len(r.b) == 0 {
		r.err = errTruncated
		return
	}
	switch r.b[0] {
	case 0x40, 0x7f, 0x7e, 0x7d, 0x7c, 0x7b, 0x70, 0x6f:
		r.byte()
	default:
		r.u64() // s33 type index
	}
}

func memarg(r *reader) {
	align := r.u32()
	if align&0x40 != 0 { // multi-memory: a memory index follows
		r.u32()
	}
	r.u64()
}

// deadline stops a call into the guest when its time is up, by setting the
// instance's interrupt global. Pause and resume take time the guest spends
// waiting on the host out of its budget.
type deadline struct {
	mu        sync.Mutex
	stop      api.MutableGlobal
	timer     *time.Timer
	gen       uint64
	armed     bool // the timer runs
	inCall    bool
	left      time.Duration
	since     time.Time
	hit       bool // the deadline passed
	cancelled bool // the caller's context ended
}

func (d *deadline) begin(budget time.Duration) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.inCall, d.hit, d.cancelled = true, false, false
	d.left = budget
	d.armLocked()
}

func (d *deadline) armLocked() {
	d.gen++
	gen := d.gen
	d.armed = true
	d.since = time.Now()
	if d.left <= 0 {
		d.hit = true
		d.stop.Set(1)
		return
	}
	d.timer = time.AfterFunc(d.left, func() {
		d.mu.Lock()
		defer d.mu.Unlock()
		if d.armed && d.gen == gen {
			d.hit = true
			d.stop.Set(1)
		}
	})
}

func (d *deadline) disarmLocked() {
	if d.armed {
		d.armed = false
		if d.timer != nil {
			d.timer.Stop()
		}
		d.left -= time.Since(d.since)
	}
}

// pause stops the clock while the guest waits for the host.
func (d *deadline) pause() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.disarmLocked()
}

func (d *deadline) resume() {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.inCall && !d.armed && !d.hit {
		d.armLocked()
	}
}

// cancel interrupts the call because the caller's context ended.
func (d *deadline) cancel() {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.inCall {
		d.cancelled = true
		d.stop.Set(1)
	}
}

// end stops the clock and clears the interrupt; it reports whether the
// deadline passed or the context ended during the call.
func (d *deadline) end() (hit, cancelled bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.disarmLocked()
	d.inCall = false
	hit, cancelled = d.hit, d.cancelled
	if hit || cancelled {
		d.stop.Set(0)
	}
	return hit, cancelled
}
