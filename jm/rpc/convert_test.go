package rpc

import (
	"encoding/json"
	"testing"

	"github.com/sluicehq/sluice/internal/jobgraph"
	jmd "github.com/sluicehq/sluice/jm/jobmaster"
)

func TestDeploymentToWire(t *testing.T) {
	d := jmd.Deployment{
		Fencing:     jmd.FencingToken{LeaderSession: "s", JobID: "j", Attempt: 3},
		ExecutionID: "e", JobID: "j", Tenant: "default", ModuleDigest: "sha256-x",
		Chain:   []jobgraph.Vertex{{ID: 1, Name: "src", Kind: jobgraph.KindSource, Connector: jobgraph.ConnectorText, Config: map[string]string{"paths": `["a"]`}}},
		Subtask: 1, Parallelism: 2, MaxParallelism: 128,
		Inputs: []jmd.InputSpec{{ResultID: "r0", Producers: 2}},
		Outputs: []jmd.OutputSpec{
			{ResultID: "r1", Partitioner: jobgraph.Forward, Targets: []string{"a", "b"}},
			{ResultID: "r2", Partitioner: jobgraph.Hash},
			{ResultID: "r3", Partitioner: jobgraph.Rebalance},
			{ResultID: "r4", Partitioner: jobgraph.Broadcast},
		},
		AllocationID: "al", JobMasterAddress: "jm:1", Config: map[string]string{"k": "v"},
	}
	w, err := deploymentToWire(d)
	if err != nil {
		t.Fatal(err)
	}
	for i, o := range w.Outputs {
		if o.Partitioner != int32(i) {
			t.Fatalf("output %s: partitioner %d, want %d (0 forward, 1 hash, 2 rebalance, 3 broadcast)", o.ResultId, o.Partitioner, i)
		}
	}
	var chain []jobgraph.Vertex
	if err := json.Unmarshal(w.Chain, &chain); err != nil || chain[0].Config["paths"] != `["a"]` || chain[0].Connector != "text" {
		t.Fatalf("chain %s: %v", w.Chain, err)
	}
	if f := fencingFromWire(w.Fencing); f != d.Fencing || w.Inputs[0].Producers != 2 || w.JobmasterAddress != "jm:1" || w.AllocationId != "al" {
		t.Fatalf("%+v", w)
	}
	d.Outputs[0].Partitioner = "teleport"
	if _, err := deploymentToWire(d); err == nil {
		t.Fatal("unknown partitioner accepted")
	}
}
