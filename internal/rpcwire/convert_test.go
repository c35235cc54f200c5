package rpcwire

import (
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/cloudwego/frugal"

	"github.com/sluicehq/sluice/idl/kitex_gen/sluice/jobmaster"
	"github.com/sluicehq/sluice/idl/kitex_gen/sluice/taskexecutor"
	"github.com/sluicehq/sluice/internal/checkpoint"
	"github.com/sluicehq/sluice/internal/control"
	"github.com/sluicehq/sluice/internal/jobconfig"
	"github.com/sluicehq/sluice/internal/jobgraph"
	"github.com/sluicehq/sluice/internal/rpcserver"
)

func testDeployment() control.Deployment {
	// A config as jobconfig.Parse returns it: its map form parses back.
	conf := jobconfig.Default()
	conf.Clock, conf.Checkpoints.Interval = jobconfig.ClockWall, time.Second
	conf.Inputs = map[string]string{"a": "tenants/default/up/a"}
	return control.Deployment{
		Fencing:     control.FencingToken{LeaderSession: "s", JobID: "j", Attempt: 3},
		ExecutionID: "e", JobID: "j", JobName: "word count", Tenant: "default", ModuleDigest: "sha256-x", Args: []string{"--input", "x"},
		Chain: []jobgraph.Vertex{
			{ID: 1, Name: "src", Kind: jobgraph.KindSource, Connector: jobgraph.ConnectorText, Config: map[string]string{"paths": `["a"]`}},
			{ID: 2, Name: "tok", Kind: jobgraph.KindFlatMap, Parallelism: 4},
		},
		Subtask: 1, Parallelism: 2, MaxParallelism: 128,
		Inputs: []control.InputSpec{{ResultID: "r0", Producers: 2}},
		Outputs: []control.OutputSpec{
			{ResultID: "r1", Partitioner: jobgraph.Forward, Targets: []string{"a", "b"}},
			{ResultID: "r2", Partitioner: jobgraph.Hash},
			{ResultID: "r3", Partitioner: jobgraph.Rebalance},
			{ResultID: "r4", Partitioner: jobgraph.Broadcast},
		},
		AllocationID: "al", JobMasterAddress: "jm:1", Config: conf,
		Limits: control.TaskLimits{MemoryBytes: 1 << 20, CallTimeout: 2 * time.Second, StateBytes: 7,
			CPUWeight: 3, FuelPerSecond: 1e9, CallFuel: 5e6},
		Restore: &checkpoint.TaskRestore{CheckpointID: 7, States: []checkpoint.StateHandle{{Key: "tenants/default/x", Size: 10, KeyGroupEnd: 63}}},
	}
}

// TestDeploymentRoundTrip: a deployment crosses the wire, as Thrift bytes,
// unchanged.
func TestDeploymentRoundTrip(t *testing.T) {
	d := testDeployment()
	w, err := DeploymentToWire(d)
	if err != nil {
		t.Fatal(err)
	}
	for i, o := range w.Outputs {
		if o.Partitioner != int32(i) {
			t.Fatalf("output %s: partitioner %d, want %d (0 forward, 1 hash, 2 rebalance, 3 broadcast)", o.ResultId, o.Partitioner, i)
		}
	}
	buf := make([]byte, frugal.EncodedSize(w))
	if _, err := frugal.EncodeObject(buf, nil, w); err != nil {
		t.Fatal(err)
	}
	var w2 taskexecutor.TaskDeployment
	if _, err := frugal.DecodeObject(buf, &w2); err != nil {
		t.Fatal(err)
	}
	got, err := DeploymentFromWire(&w2)
	if err != nil {
		t.Fatal(err)
	}
	// Compared as printed: Thrift does not tell a nil map or list from an
	// empty one.
	if !reflect.DeepEqual(got.Restore, d.Restore) {
		t.Fatalf("restore: got %+v, want %+v", got.Restore, d.Restore)
	}
	got.Restore, d.Restore = nil, nil
	if g, w := fmt.Sprintf("%+v", got), fmt.Sprintf("%+v", d); g != w {
		t.Fatalf("round trip:\n got %s\nwant %s", g, w)
	}

	d.Outputs[0].Partitioner = "teleport"
	if _, err := DeploymentToWire(d); err == nil {
		t.Fatal("unknown partitioner accepted")
	}
}

func TestDeploymentFromWireRefuses(t *testing.T) {
	good := func() *taskexecutor.TaskDeployment {
		w, err := DeploymentToWire(testDeployment())
		if err != nil {
			t.Fatal(err)
		}
		return w
	}
	if _, err := DeploymentFromWire(nil); err == nil {
		t.Error("nil deployment accepted")
	}
	for name, mod := range map[string]func(*taskexecutor.TaskDeployment){
		"no fencing":          func(w *taskexecutor.TaskDeployment) { w.Fencing = nil },
		"missing vertex":      func(w *taskexecutor.TaskDeployment) { w.Chain[1] = nil },
		"unknown partitioner": func(w *taskexecutor.TaskDeployment) { w.Outputs[2].Partitioner = 9 },
	} {
		w := good()
		mod(w)
		if _, err := DeploymentFromWire(w); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	// Negative limits read as unset.
	w := good()
	neg := int64(-5)
	negWeight := int32(-5)
	w.MemoryLimitBytes, w.CallTimeoutMs, w.MaxStateBytes = &neg, &neg, &neg
	w.CpuWeight, w.FuelPerSecond, w.CallFuel = &negWeight, &neg, &neg
	if d, err := DeploymentFromWire(w); err != nil || d.Limits != (control.TaskLimits{}) {
		t.Fatalf("negative limits: %+v, %v", d.Limits, err)
	}
}

func TestPartitionerRoundTrip(t *testing.T) {
	for i, p := range partitioners {
		if PartitionerToWire(p) != int32(i) {
			t.Errorf("PartitionerToWire(%s) = %d", p, PartitionerToWire(p))
		}
		if q, err := PartitionerFromWire(int32(i)); err != nil || q != p {
			t.Errorf("PartitionerFromWire(%d) = %s, %v", i, q, err)
		}
	}
	if PartitionerToWire("zigzag") != -1 {
		t.Error("unknown partitioner has a wire number")
	}
	if _, err := PartitionerFromWire(-1); err == nil {
		t.Error("partitioner -1 accepted")
	}
}

// TestReportsRoundTrip: what a task says to its JobMaster arrives as it was
// said.
func TestReportsRoundTrip(t *testing.T) {
	f := control.FencingToken{LeaderSession: "s", JobID: "j", Attempt: 2}
	u := control.TaskUpdate{
		Fencing: f, ExecutionID: "e", State: "FINISHED", Failure: "x", FailureKind: control.FailureConsequence, Accumulators: map[string]int64{"n": 3},
		Collected: [][]byte{[]byte("r")}, SinkParts: []checkpoint.SinkPart{{Pending: "p", Final: "f", Size: 4}},
		Metrics: &control.TaskMetrics{RecordsIn: 1, RecordsOut: 2, BytesIn: 3, BytesOut: 4, BusyMsPerSecond: 5,
			IdleMsPerSecond: 6, BackPressuredMsPerSecond: 7, OutputBufferUsage: 0.5, MemoryPages: 8, Fuel: 9,
			Reported: time.UnixMilli(1700000000123), AccumulatedBusyMs: 10, AccumulatedIdleMs: 11, AccumulatedBackPressuredMs: 12, LastAlignmentMs: 13},
	}
	if got := TaskUpdateFromWire(TaskUpdateToWire(u)); !reflect.DeepEqual(got, u) {
		t.Errorf("update: %+v", got)
	}
	r := control.SplitRequest{Fencing: f, ExecutionID: "e", VertexID: 1, Subtask: 3}
	if got := SplitRequestFromWire(SplitRequestToWire(r)); got != r {
		t.Errorf("split request: %+v", got)
	}
	sp := checkpoint.Split{Key: "in/a", Offset: 4, Length: 9}
	if got, done, err := NextSplitFromWire(NextSplitToWire(sp, false)); got != sp || done || err != nil {
		t.Errorf("split: %+v %v %v", got, done, err)
	}
	if _, done, err := NextSplitFromWire(NextSplitToWire(checkpoint.Split{}, true)); !done || err != nil {
		t.Errorf("done: %v %v", done, err)
	}
	// Neither a split nor done: a following source has no split yet.
	if got, done, err := NextSplitFromWire(NextSplitToWire(checkpoint.Split{}, false)); got != (checkpoint.Split{}) || done || err != nil {
		t.Errorf("no split yet: %+v %v %v", got, done, err)
	}
	if _, _, err := NextSplitFromWire(&jobmaster.NextSplitResponse{Split: &jobmaster.InputSplit{Offset: 3}}); err == nil {
		t.Error("a split without an object key accepted")
	}
	a := checkpoint.Ack{
		ExecutionID: "e", CheckpointID: 5, State: &checkpoint.StateHandle{Key: "k", Size: 1, KeyGroupStart: 2, KeyGroupEnd: 3},
		Source:    &checkpoint.SourcePosition{Finished: []string{"in/a@9"}, Current: &sp},
		SinkParts: []checkpoint.SinkPart{{Pending: "p", Final: "f"}},
		Alignment: 7 * time.Millisecond,
	}
	aw := AckToWire(f, a)
	if got := AckFromWire(aw); !reflect.DeepEqual(got, a) || FencingFromWire(aw.Fencing) != f {
		t.Errorf("ack: %+v", got)
	}
	dc := checkpoint.Decline{ExecutionID: "e", CheckpointID: 5, Reason: "disk full"}
	if got := DeclineFromWire(DeclineToWire(f, dc)); got != dc {
		t.Errorf("decline: %+v", got)
	}
	tr := checkpoint.Trigger{ID: 5, TimestampMs: 99, Savepoint: true, Stop: true}
	tw := TriggerToWire(f, "e", tr)
	if got := TriggerFromWire(tw); got != tr || tw.ExecutionId != "e" || FencingFromWire(tw.Fencing) != f {
		t.Errorf("trigger: %+v", got)
	}
}

// FuzzDeploymentFromWire decodes arbitrary bytes as a TaskDeployment, as a
// TaskManager's server does (rpcserver.CheckThriftStruct first), and
// converts it: no input panics, and what converts
// converts back to the same wire chain.
func FuzzDeploymentFromWire(f *testing.F) {
	w, err := DeploymentToWire(testDeployment())
	if err != nil {
		f.Fatal(err)
	}
	buf := make([]byte, frugal.EncodedSize(w))
	if _, err := frugal.EncodeObject(buf, nil, w); err != nil {
		f.Fatal(err)
	}
	f.Add(buf)
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		n, err := rpcserver.CheckThriftStruct(b)
		if err != nil {
			return
		}
		var w taskexecutor.TaskDeployment
		if _, err := frugal.DecodeObject(b[:n], &w); err != nil {
			return
		}
		d, err := DeploymentFromWire(&w)
		if err != nil {
			return
		}
		back := ChainToWire(d.Chain)
		if len(back) != len(w.Chain) {
			t.Fatalf("chain of %d vertices came back with %d", len(w.Chain), len(back))
		}
		for i := range back {
			if back[i].Id != w.Chain[i].Id || back[i].Kind != w.Chain[i].Kind || back[i].Connector != w.Chain[i].Connector {
				t.Fatalf("vertex %d: %+v came back as %+v", i, w.Chain[i], back[i])
			}
		}
	})
}
