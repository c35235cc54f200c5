package rewrite

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"

	"github.com/sluicehq/sluice/wasmhost/internal/validate"
	"github.com/sluicehq/sluice/wasmhost/internal/wasmbin"
)

func sect(id byte, body ...byte) []byte {
	return append(wasmbin.AppendU32([]byte{id}, uint32(len(body))), body...)
}

func name(s string) []byte { return append(wasmbin.AppendU32(nil, uint32(len(s))), s...) }

// spinBody counts a local down from 65536 in a loop: several trips through
// the fuel refill.
func spinBody() []byte {
	return []byte{1, 1, 0x7f, 0x41, 0x80, 0x80, 0x04, 0x21, 0x00,
		0x03, 0x40, 0x20, 0x00, 0x41, 0x01, 0x6b, 0x22, 0x00, 0x0d, 0x00, 0x0b, 0x0b}
}

// testModule is a module with one function () -> () of body (locals
// included), exported as export; extra sections go before the code.
type testModule struct {
	body     []byte
	export   string
	noMemory bool
	extra    [][]byte
}

func (m testModule) bytes() []byte {
	if m.body == nil {
		m.body = spinBody()
	}
	if m.export == "" {
		m.export = "spin"
	}
	b := []byte(wasmbin.Header)
	b = append(b, sect(wasmbin.SectionType, 1, 0x60, 0, 0)...)
	b = append(b, sect(wasmbin.SectionFunction, 1, 0)...)
	if !m.noMemory {
		b = append(b, sect(wasmbin.SectionMemory, 1, 0, 1)...)
	}
	b = append(b, sect(wasmbin.SectionExport, append(append([]byte{1}, name(m.export)...), 0, 0)...)...)
	for _, e := range m.extra {
		b = append(b, e...)
	}
	code := append(wasmbin.AppendU32([]byte{1}, uint32(len(m.body))), m.body...)
	return append(b, sect(wasmbin.SectionCode, code...)...)
}

func TestInstrumentedModuleRunsAndStops(t *testing.T) {
	ctx := context.Background()
	out, err := Instrument(testModule{}.bytes(), validate.MaxTableElements)
	if err != nil {
		t.Fatal(err)
	}
	if err := structureErr(out, validate.NoLimits()); err != nil {
		t.Fatalf("the instrumented module fails Structure: %v", err)
	}
	// One function, no imports: $tick is function 1.
	if n := bytes.Count(out, fuelCheck(0, 1, 1)); n != 2 {
		t.Errorf("%d fuel checks, want 2 (function entry and loop header)", n)
	}
	r := wazero.NewRuntime(ctx)
	defer r.Close(ctx)
	mod, err := r.Instantiate(ctx, out)
	if err != nil {
		t.Fatalf("wazero refuses the instrumented module: %v", err)
	}
	fuel := func() uint64 {
		left := uint64(uint32(mod.ExportedGlobal(FuelExport).Get()))
		return mod.ExportedGlobal(FuelTripsExport).Get()*FuelInterval + FuelInterval - left
	}
	if _, err := mod.ExportedFunction("spin").Call(ctx); err != nil {
		t.Fatalf("spin: %v", err)
	}
	if mod.ExportedFunction(TickExport) == nil {
		t.Errorf("no %q export", TickExport)
	}
	// One check at the function entry, one per iteration.
	one := fuel()
	if one < 65536 || one > 65538 {
		t.Errorf("fuel after one spin: %d, want the 65536 iterations and the entry", one)
	}
	if _, err := mod.ExportedFunction("spin").Call(ctx); err != nil {
		t.Fatalf("spin: %v", err)
	}
	if got := fuel(); got != 2*one {
		t.Errorf("fuel after two spins: %d, want %d", got, 2*one)
	}
	stop, ok := mod.ExportedGlobal(InterruptExport).(api.MutableGlobal)
	if !ok {
		t.Fatalf("no mutable global %q", InterruptExport)
	}
	stop.Set(1)
	if _, err := mod.ExportedFunction("spin").Call(ctx); err == nil || !strings.Contains(err.Error(), "unreachable") {
		t.Fatalf("spin with the interrupt set: %v, want the unreachable trap", err)
	}
}

func TestInstrumentCapsTablesAndDropsDWARF(t *testing.T) {
	table := sect(wasmbin.SectionTable, 1, 0x70, 0, 1) // funcref, min 1, no max
	dwarf := sect(wasmbin.SectionCustom, append(name(".debug_info"), 1, 2, 3)...)
	out, err := Instrument(testModule{extra: [][]byte{table, dwarf}}.bytes(), validate.MaxTableElements)
	if err != nil {
		t.Fatal(err)
	}
	secs, err := wasmbin.Sections(out)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range secs {
		switch s.ID {
		case wasmbin.SectionCustom:
			t.Error("the DWARF section is still there")
		case wasmbin.SectionTable:
			want := append([]byte{1, 0x70, 1, 1}, wasmbin.AppendU32(nil, validate.MaxTableElements)...)
			if !bytes.Equal(s.Body, want) {
				t.Errorf("table section % x, want % x", s.Body, want)
			}
		}
	}
}

func TestInstrumentRejects(t *testing.T) {
	for _, tc := range []struct {
		name string
		m    testModule
		want string
	}{
		{"start function", testModule{extra: [][]byte{sect(wasmbin.SectionStart, 0)}}, "start function"},
		{"reserved export", testModule{export: InterruptExport}, "is reserved"},
		{"reserved tick export", testModule{export: TickExport}, "is reserved"},
		{"reserved fuel export", testModule{export: FuelTripsExport}, "is reserved"},
		{"no memory", testModule{noMemory: true}, "no linear memory"},
		{"foreign global", testModule{body: []byte{0, 0x23, 0x00, 0x1a, 0x0b}}, "function 0: global index 0 out of range"},
		{"unknown instruction", testModule{body: []byte{0, 0xff, 0x0b}}, "unsupported instruction 0xff"},
	} {
		if _, err := Instrument(tc.m.bytes(), validate.MaxTableElements); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want %q", tc.name, err, tc.want)
		}
	}
}

// FuzzInstrument: for bytes validate.Structure accepts, Instrument returns
// an error or a module Structure accepts too, never panics.
func FuzzInstrument(f *testing.F) {
	f.Add(testModule{}.bytes())
	f.Add(testModule{extra: [][]byte{sect(wasmbin.SectionTable, 1, 0x70, 1, 1, 2)}}.bytes())
	f.Fuzz(func(t *testing.T, wasm []byte) {
		if structureErr(wasm, validate.DefaultLimits()) != nil {
			return
		}
		out, err := Instrument(wasm, validate.MaxTableElements)
		if err != nil {
			return
		}
		if err := structureErr(out, validate.NoLimits()); err != nil {
			t.Fatalf("Structure accepts the module but not its instrumented version: %v", err)
		}
	})
}

func structureErr(wasm []byte, lim validate.Shape) error {
	_, err := validate.Structure(context.Background(), wasm, lim)
	return err
}
