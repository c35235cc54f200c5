//go:build !wasip1

package guest

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/sluicehq/sluice/internal/abi"
	"github.com/sluicehq/sluice/internal/jobgraph"
)

// TestHost drives the SDK natively through its host test double, for the
// tests of the typed layer (typed_test.go, package guest_test: sdk/guest/typed
// imports this package, so its tests cannot live inside it). It is the
// examples' exampleHost with errors instead of panics.
type TestHost struct{ h *exampleHost }

// NewTestHost registers plan as the job, with a fresh host.
func NewTestHost(plan func(env *Env)) *TestHost {
	h := newExampleHost()
	registered = plan
	return &TestHost{h: h}
}

// Close forgets the job and the host.
func (t *TestHost) Close() { t.h.close() }

func (t *TestHost) status(call string, st int32) error {
	if st != abi.StatusOK && st != abi.StatusDone {
		return fmt.Errorf("%s: status %d: %s", call, st, t.h.failMsg)
	}
	return nil
}

// Plan calls the plan export.
func (t *TestHost) Plan(args ...string) (*jobgraph.Graph, error) { return t.h.plan(args...) }

// Open starts a task running chain, in a new instance.
func (t *TestHost) Open(chain ...int) error {
	current, counters = nil, nil
	info, _ := json.Marshal(abi.TaskInfo{Task: "test", Chain: chain, Parallelism: 1, MaxParallelism: 128})
	return t.status("open", doOpen(info))
}

// Process hands recs to the task as one batch.
func (t *TestHost) Process(recs ...Record) error {
	return t.status("process", doProcess(abi.AppendBatch(nil, recs)))
}

// Poll asks the task's source for up to max records.
func (t *TestHost) Poll(max int) (done bool, err error) {
	st := doSourcePoll(int32(max))
	return st == abi.StatusDone, t.status("source poll", st)
}

// EndInput ends the task's input.
func (t *TestHost) EndInput() error { return t.status("end of input", doEndInput()) }

// Barrier passes checkpoint barrier id.
func (t *TestHost) Barrier(id int64) error { return t.status("barrier", doBarrier(id)) }

// CloseTask closes the task.
func (t *TestHost) CloseTask() error { return t.status("close", doClose()) }

// SetClock sets the host's processing time.
func (t *TestHost) SetClock(ms int64) { t.h.clock = ms }

// FireTimers fires the timers due at the host's clock.
func (t *TestHost) FireTimers() error {
	h := t.h
	slices.SortStableFunc(h.timers, func(a, b Record) int { return int(a.Time - b.Time) })
	var due []Record
	for len(h.timers) > 0 && h.timers[0].Time <= h.clock {
		due, h.timers = append(due, h.timers[0]), h.timers[1:]
	}
	if len(due) == 0 {
		return nil
	}
	return t.status("timers", doTimers(abi.AppendBatch(nil, due)))
}

// Timers returns the number of timers registered and not fired.
func (t *TestHost) Timers() int { return len(t.h.timers) }

// Take returns the records emitted since the last Take.
func (t *TestHost) Take() []Record { return t.h.take() }

// Counters returns the counters added so far.
func (t *TestHost) Counters() map[string]int64 { return t.h.counters }

// KeyedState returns the keyed state, by "vertex/name/key".
func (t *TestHost) KeyedState() map[string][]byte { return t.h.state }

// discardHost is exampleHost with an emit that only counts, for benchmarks.
type discardHost struct {
	*exampleHost
	records int
}

func (h *discardHost) emit(b []byte) { h.records += int(binary.LittleEndian.Uint32(b)) }

// Discard makes the host count what the task emits instead of keeping it:
// Take returns nothing, Emitted the number of records.
func (t *TestHost) Discard() { testHost = &discardHost{exampleHost: t.h} }

// Emitted returns how many records were emitted since Discard.
func (t *TestHost) Emitted() int { return testHost.(*discardHost).records }
