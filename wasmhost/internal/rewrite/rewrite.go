package rewrite

import (
	"errors"
	"fmt"

	"github.com/sluicehq/sluice/internal/abi"
	"github.com/sluicehq/sluice/wasmhost/internal/wasmbin"
)

// InterruptExport names the added $interrupt global in the instrumented
// module: the host sets it to 1 to stop the running call, and back to 0.
const InterruptExport = "sluice:interrupt"

// TickExport names the added $tick function in the instrumented module:
// the fuel check calls it every FuelInterval checks, and its body is the
// memory.grow(0) that comes back to Go. Being a function of its own, it is
// where the host can look at the guest's call stack (a wazero function
// listener on $tick alone, which costs nothing in the guest's own
// functions).
const TickExport = "sluice:tick"

// FuelExport and FuelTripsExport name the added $fuel (i32: checks left
// until the next trip to Go) and $trips (i64: trips so far, counted by
// $tick) globals. The checks run so far, the guest's fuel consumed, are
// $trips × FuelInterval + FuelInterval − $fuel.
const (
	FuelExport      = "sluice:fuel"
	FuelTripsExport = "sluice:fuel_trips"
)

// FuelInterval is how many checks a guest runs between trips to Go. A trip
// costs about as much as a few hundred checks; 1<<14 keeps it under 0.1% and
// lets the world stop within well under a millisecond of guest time.
const FuelInterval = 1 << 14

// Instrument returns wasm with the interrupt and fuel globals and their
// checks added, and the maximum of every table capped at maxTable elements:
// table.grow beyond it fails (returns -1) in the guest. It decodes every
// instruction, so it also rejects what it cannot parse; it does not
// otherwise validate (wazero does, after). wasm must have passed
// validate.Structure, which refuses tables that start above the cap.
//
// # Errors
//
// A module with a start function (the host must call it under a deadline:
// export it as _initialize), an export named InterruptExport, no linear
// memory, an instruction it cannot decode, or one that names a global the
// module does not have.
func Instrument(wasm []byte, maxTable uint32) ([]byte, error) {
	if err := wasmbin.CheckHeader(wasm); err != nil {
		return nil, err
	}
	secs, err := wasmbin.Sections(wasm)
	if err != nil {
		return nil, err
	}
	var importedGlobals, definedGlobals, importedFuncs, definedFuncs, types uint32
	hasMemory := false
	for _, s := range secs {
		switch s.ID {
		case wasmbin.SectionImport:
			ims, err := wasmbin.ImportSection(s.Body)
			if err != nil {
				return nil, err
			}
			for _, im := range ims {
				switch im.Kind {
				case wasmbin.ImportFunc:
					importedFuncs++
				case wasmbin.ImportGlobal:
					importedGlobals++
				case wasmbin.ImportMemory:
					hasMemory = true
				}
			}
		case wasmbin.SectionMemory:
			hasMemory = hasMemory || wasmbin.NewReader(s.Body).U32() > 0
		case wasmbin.SectionGlobal:
			gr := wasmbin.NewReader(s.Body)
			definedGlobals = gr.U32()
			if gr.Err() != nil {
				return nil, fmt.Errorf("global section: %w", gr.Err())
			}
		case wasmbin.SectionType, wasmbin.SectionFunction:
			r := wasmbin.NewReader(s.Body)
			n := r.U32()
			if r.Err() != nil {
				return nil, fmt.Errorf("section %d: %w", s.ID, r.Err())
			}
			if s.ID == wasmbin.SectionType {
				types = n
			} else {
				definedFuncs = n
			}
		case wasmbin.SectionStart:
			return nil, errors.New("module has a start function: export it as _initialize instead")
		case wasmbin.SectionExport:
			for _, reserved := range []string{InterruptExport, TickExport, FuelExport, FuelTripsExport} {
				if wasmbin.ExportsName(s.Body, reserved) {
					return nil, fmt.Errorf("export name %q is reserved", reserved)
				}
			}
		}
	}
	if !hasMemory {
		// The fuel check needs memory.grow, and the ABI needs a memory anyway.
		return nil, fmt.Errorf("module has no linear memory: the guest must export its memory as %q", abi.ExportMemory)
	}
	g := importedGlobals + definedGlobals // $interrupt; $fuel is g+1, $trips g+2
	tick := importedFuncs + definedFuncs  // $tick, of the added type [] -> [] (index types)
	check := fuelCheck(g, g+1, tick)
	newType := []byte{0x60, 0x00, 0x00}
	newFunc := wasmbin.AppendU32(nil, types)
	// $tick counts the trip (the fuel consumed is read from it: it runs
	// once per FuelInterval checks, so the common path pays nothing), then
	// comes back to Go.
	tickBody := wasmbin.AppendU32([]byte{0x00, 0x23}, g+2)                      // no locals; global.get $trips
	tickBody = wasmbin.AppendU32(append(tickBody, 0x42, 0x01, 0x7c, 0x24), g+2) // i64.const 1; i64.add; global.set $trips
	tickBody = append(tickBody, 0x41, 0x00, 0x40, 0x00, 0x1a, 0x0b)             // i32.const 0; memory.grow 0; drop; end
	newCode := append(wasmbin.AppendU32(nil, uint32(len(tickBody))), tickBody...)
	newGlobal := []byte{0x7f, 0x01, 0x41, 0x00, 0x0b} // $interrupt: mut i32 = i32.const 0
	newGlobal = append(append(newGlobal, 0x7f, 0x01, 0x41), wasmbin.AppendU32(nil, FuelInterval)...)
	newGlobal = append(newGlobal, 0x0b)                         // $fuel: mut i32 = i32.const FuelInterval
	newGlobal = append(newGlobal, 0x7e, 0x01, 0x42, 0x00, 0x0b) // $trips: mut i64 = i64.const 0
	const addedGlobals, addedExports = 3, 4
	newExport := append(wasmbin.AppendU32(nil, uint32(len(InterruptExport))), InterruptExport...)
	newExport = wasmbin.AppendU32(append(newExport, 0x03), g)
	newExport = append(append(newExport, wasmbin.AppendU32(nil, uint32(len(TickExport)))...), TickExport...)
	newExport = wasmbin.AppendU32(append(newExport, 0x00), tick)
	for i, n := range []string{FuelExport, FuelTripsExport} {
		newExport = append(wasmbin.AppendU32(newExport, uint32(len(n))), n...)
		newExport = wasmbin.AppendU32(append(newExport, 0x03), g+1+uint32(i))
	}

	out := append([]byte(nil), wasmbin.Header...)
	emit := func(id byte, body []byte) {
		out = append(out, id)
		out = wasmbin.AppendU32(out, uint32(len(body)))
		out = append(out, body...)
	}
	// Section order: 1 type, 2 import, 3 function, 4 table, 5 memory,
	// 13 tag, 6 global, 7 export, 8 start, 9 element, 12 data count,
	// 10 code, 11 data; custom sections (0) anywhere.
	order := map[byte]int{1: 1, 2: 2, 3: 3, 4: 4, 5: 5, 13: 6, 6: 7, 7: 8, 8: 9, 9: 10, 12: 11, 10: 12, 11: 13}
	addedGlobal, addedExport, addedType, addedFunc, addedCode := false, false, false, false, false
	flush := func(before int) {
		if !addedType && before > order[wasmbin.SectionType] {
			emit(wasmbin.SectionType, append(wasmbin.AppendU32(nil, 1), newType...))
			addedType = true
		}
		if !addedFunc && before > order[wasmbin.SectionFunction] {
			emit(wasmbin.SectionFunction, append(wasmbin.AppendU32(nil, 1), newFunc...))
			addedFunc = true
		}
		if !addedCode && before > order[wasmbin.SectionCode] {
			emit(wasmbin.SectionCode, append(wasmbin.AppendU32(nil, 1), newCode...))
			addedCode = true
		}
		if !addedGlobal && before > order[wasmbin.SectionGlobal] {
			emit(wasmbin.SectionGlobal, append(wasmbin.AppendU32(nil, addedGlobals), newGlobal...))
			addedGlobal = true
		}
		if !addedExport && before > order[wasmbin.SectionExport] {
			emit(wasmbin.SectionExport, append(wasmbin.AppendU32(nil, addedExports), newExport...))
			addedExport = true
		}
	}
	for _, s := range secs {
		if s.ID != wasmbin.SectionCustom {
			flush(order[s.ID])
		}
		switch s.ID {
		case wasmbin.SectionCustom:
			// DWARF refers to code offsets, which change: drop it.
			if n, ok := wasmbin.CustomName(s.Body); ok && len(n) > 7 && n[:7] == ".debug_" {
				continue
			}
			emit(s.ID, s.Body)
		case wasmbin.SectionGlobal:
			gr := wasmbin.NewReader(s.Body)
			n := gr.U32()
			emit(s.ID, append(wasmbin.AppendU32(nil, n+addedGlobals), append(append([]byte(nil), gr.Rest()...), newGlobal...)...))
			addedGlobal = true
		case wasmbin.SectionType, wasmbin.SectionFunction:
			r := wasmbin.NewReader(s.Body)
			n := r.U32()
			add := newType
			if s.ID == wasmbin.SectionFunction {
				add, addedFunc = newFunc, true
			} else {
				addedType = true
			}
			emit(s.ID, append(wasmbin.AppendU32(nil, n+1), append(append([]byte(nil), r.Rest()...), add...)...))
		case wasmbin.SectionExport:
			er := wasmbin.NewReader(s.Body)
			n := er.U32()
			emit(s.ID, append(wasmbin.AppendU32(nil, n+addedExports), append(append([]byte(nil), er.Rest()...), newExport...)...))
			addedExport = true
		case wasmbin.SectionTable:
			tables, err := capTables(s.Body, maxTable)
			if err != nil {
				return nil, err
			}
			emit(s.ID, tables)
		case wasmbin.SectionCode:
			code, err := instrumentCode(s.Body, check, g, newCode)
			if err != nil {
				return nil, err
			}
			emit(s.ID, code)
			addedCode = true
		default:
			emit(s.ID, s.Body)
		}
	}
	flush(1 << 30)
	return out, nil
}

// fuelCheck returns the instructions placed at every function entry and loop
// header (see the package doc). FuelInterval is positive and below 2^20, so
// its unsigned LEB128 is also the signed one i32.const wants.
func fuelCheck(interrupt, fuel, tick uint32) []byte {
	u := wasmbin.AppendU32
	c := u([]byte{0x23}, fuel)                     // global.get $fuel
	c = append(c, 0x41, 0x01, 0x6b)                // i32.const 1; i32.sub
	c = u(append(c, 0x24), fuel)                   // global.set $fuel
	c = u(append(c, 0x23), fuel)                   // global.get $fuel
	c = append(c, 0x45, 0x04, 0x40, 0x41)          // i32.eqz; if; i32.const
	c = u(c, FuelInterval)                         //   FuelInterval
	c = u(append(c, 0x24), fuel)                   //   global.set $fuel
	c = u(append(c, 0x10), tick)                   //   call $tick (memory.grow 0)
	c = u(append(c, 0x23), interrupt)              // global.get $interrupt
	return append(c, 0x04, 0x40, 0x00, 0x0b, 0x0b) // if; unreachable; end; end
}

// capTables rewrites the table section so every table has a maximum of at
// most maxTable.
func capTables(body []byte, maxTable uint32) ([]byte, error) {
	r := wasmbin.NewReader(body)
	n := r.U32()
	out := wasmbin.AppendU32(nil, n)
	for i := uint32(0); i < n && r.Err() == nil; i++ {
		reftype, flags := r.Byte(), r.Byte()
		min := r.U32()
		max := maxTable
		if flags&1 != 0 {
			if m := r.U32(); m < max {
				max = m
			}
		}
		if r.Err() != nil {
			break
		}
		if flags&^1 != 0 || min > maxTable {
			// validate.Structure refuses these.
			return nil, fmt.Errorf("table %d: limits flags %#x, minimum %d: not capped", i, flags, min)
		}
		if max < min {
			max = min
		}
		out = append(out, reftype, 1)
		out = wasmbin.AppendU32(wasmbin.AppendU32(out, min), max)
	}
	if r.Err() != nil {
		return nil, fmt.Errorf("table section: %w", r.Err())
	}
	return out, nil
}

// instrumentCode rewrites the code section: the check goes at the start of
// every function body and after every loop's block type. Instructions that
// touch global g, which the guest's own code cannot have named, are refused.
func instrumentCode(body, check []byte, g uint32, tick []byte) ([]byte, error) {
	r := wasmbin.NewReader(body)
	n := r.U32()
	out := wasmbin.AppendU32(nil, n+1)
	var fn []byte
	for i := uint32(0); i < n; i++ {
		b := r.Name()
		if r.Err() != nil {
			return nil, fmt.Errorf("code section: function %d: %w", i, r.Err())
		}
		fr := wasmbin.NewReader(b)
		locals := fr.U32()
		for j := uint32(0); j < locals && fr.Err() == nil; j++ {
			fr.U32()
			fr.Byte()
		}
		if fr.Err() != nil {
			return nil, fmt.Errorf("function %d: locals: %w", i, fr.Err())
		}
		fn = append(fn[:0], b[:len(b)-fr.Len()]...)
		fn = append(fn, check...)
		for fr.Len() > 0 {
			start := fr.Rest()
			op := fr.Byte()
			if err := fr.Immediates(op, g); err != nil {
				return nil, fmt.Errorf("function %d: %w", i, err)
			}
			fn = append(fn, start[:len(start)-fr.Len()]...)
			if op == wasmbin.OpLoop {
				fn = append(fn, check...)
			}
		}
		out = wasmbin.AppendU32(out, uint32(len(fn)))
		out = append(out, fn...)
	}
	if r.Len() != 0 {
		return nil, errors.New("code section: trailing bytes")
	}
	return append(out, tick...), nil
}
