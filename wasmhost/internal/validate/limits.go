package validate

import (
	"fmt"
	"math"
)

// Shape is the size of a module's structure: what a module has when
// Structure measures it, or the most a module may have when it is the
// limits Structure checks. Per-function fields are the largest over the
// module's functions; the others are module totals.
//
// The limits bound what the host spends before any guest code runs:
// wazero's decoder, validator and compiler and the rewriter all work in
// time and memory that grow with these numbers (the compiler faster than
// linearly in Nesting and BodyBytes). See docs/SECURITY.md for the values
// and what real guests measured.
type Shape struct {
	Functions      uint32 // functions the module defines
	BodyBytes      uint32 // bytes of one function body
	CodeBytes      uint32 // bytes of the code section
	Nesting        uint32 // control depth (block, loop, if) in one function
	LoopNesting    uint32 // loops around one instruction
	Locals         uint32 // locals one function declares
	BrTableTargets uint32 // targets of one br_table
	Types          uint32 // function types
	TypeArity      uint32 // params plus results of one function type
	Imports        uint32
	Exports        uint32
	Globals        uint32 // globals the module defines
	Tables         uint32 // tables the module defines
	TableElements  uint32 // initial elements of one table
	Elements       uint32 // element segments
	ElementItems   uint32 // items of all element segments
	DataSegments   uint32
}

// DefaultLimits returns the limits the host applies; docs/SECURITY.md
// gives the reason for each.
func DefaultLimits() Shape {
	return Shape{
		Functions:      200_000,
		BodyBytes:      512 << 10,
		CodeBytes:      48 << 20,
		Nesting:        20_000,
		LoopNesting:    1_000,
		Locals:         MaxLocals,
		BrTableTargets: 65_536,
		Types:          10_000,
		TypeArity:      1_000,
		Imports:        1_000,
		Exports:        10_000,
		Globals:        10_000,
		Tables:         16,
		TableElements:  MaxTableElements,
		Elements:       10_000,
		ElementItems:   MaxTableElements,
		DataSegments:   1_000_000,
	}
}

// NoLimits is a Shape every module fits, for measuring one.
func NoLimits() Shape {
	const m = math.MaxUint32
	return Shape{m, m, m, m, m, m, m, m, m, m, m, m, m, m, m, m, m}
}

// LimitError is a module above one of its limits.
type LimitError struct {
	// Limit is the Shape field's name, e.g. "Nesting".
	Limit string
	// Value is what the module has (at least: checking stops at the first
	// excess), Max the limit.
	Value, Max uint64
	// Function is the module function index (imports first) the value
	// belongs to, or -1 for a module total.
	Function int64
}

func (e *LimitError) Error() string {
	what := limitWhat[e.Limit]
	if e.Function >= 0 {
		return fmt.Sprintf("function %d: %s %d is above the host's limit of %d (module limit %s; see docs/SECURITY.md)", e.Function, what, e.Value, e.Max, e.Limit)
	}
	return fmt.Sprintf("%s %d is above the host's limit of %d (module limit %s; see docs/SECURITY.md)", what, e.Value, e.Max, e.Limit)
}

var limitWhat = map[string]string{
	"Functions":      "defined functions",
	"BodyBytes":      "function body bytes",
	"CodeBytes":      "code section bytes",
	"Nesting":        "control nesting depth",
	"LoopNesting":    "loop nesting depth",
	"Locals":         "locals",
	"BrTableTargets": "br_table targets",
	"Types":          "function types",
	"TypeArity":      "params and results of a function type",
	"Imports":        "imports",
	"Exports":        "exports",
	"Globals":        "globals",
	"Tables":         "tables",
	"TableElements":  "initial table elements",
	"Elements":       "element segments",
	"ElementItems":   "element segment items",
	"DataSegments":   "data segments",
}

// over records value into *got (the largest, or the sum when add) and
// returns a LimitError when it passes max.
func over(limit string, got *uint32, value uint64, max uint32, fn int64, add bool) error {
	if add {
		value += uint64(*got)
	}
	if value > math.MaxUint32 {
		value = math.MaxUint32
	}
	if uint32(value) > *got {
		*got = uint32(value)
	}
	if value > uint64(max) {
		return &LimitError{Limit: limit, Value: value, Max: uint64(max), Function: fn}
	}
	return nil
}
