package rpcserver_test

import (
	"encoding/binary"
	"testing"

	"github.com/cloudwego/frugal"

	"github.com/sluicehq/sluice/idl/kitex_gen/sluice/common"
	"github.com/sluicehq/sluice/idl/kitex_gen/sluice/dispatcher"
	"github.com/sluicehq/sluice/idl/kitex_gen/sluice/jobmaster"
	"github.com/sluicehq/sluice/idl/kitex_gen/sluice/resourcemanager"
	"github.com/sluicehq/sluice/idl/kitex_gen/sluice/taskexecutor"
	"github.com/sluicehq/sluice/internal/rpcserver"
)

// requestTypes makes one empty value of every request (argument) type the
// servers decode.
var requestTypes = []func() any{
	func() any { return new(dispatcher.DispatcherUploadModuleArgs) },
	func() any { return new(dispatcher.DispatcherSubmitJobArgs) },
	func() any { return new(dispatcher.DispatcherListJobsArgs) },
	func() any { return new(dispatcher.DispatcherGetJobArgs) },
	func() any { return new(dispatcher.DispatcherCancelJobArgs) },
	func() any { return new(dispatcher.DispatcherWaitJobArgs) },
	func() any { return new(dispatcher.DispatcherOverviewArgs) },
	func() any { return new(dispatcher.DispatcherTriggerSavepointArgs) },
	func() any { return new(dispatcher.DispatcherListCheckpointsArgs) },
	func() any { return new(dispatcher.DispatcherDisposeSavepointArgs) },
	func() any { return new(resourcemanager.ResourceManagerRegisterTaskManagerArgs) },
	func() any { return new(resourcemanager.ResourceManagerHeartbeatArgs) },
	func() any { return new(jobmaster.JobMasterUpdateTaskStateArgs) },
	func() any { return new(jobmaster.JobMasterRequestNextSplitArgs) },
	func() any { return new(jobmaster.JobMasterAcknowledgeCheckpointArgs) },
	func() any { return new(jobmaster.JobMasterDeclineCheckpointArgs) },
	func() any { return new(taskexecutor.TaskExecutorDeployTaskArgs) },
	func() any { return new(taskexecutor.TaskExecutorCancelTaskArgs) },
	func() any { return new(taskexecutor.TaskExecutorFreeSlotArgs) },
	func() any { return new(taskexecutor.TaskExecutorTriggerCheckpointArgs) },
	func() any { return new(taskexecutor.TaskExecutorNotifyCheckpointArgs) },
}

// FuzzDecodeRequests decodes arbitrary bytes as every request type the way
// the servers do (CheckThriftStruct, then the Thrift decoder): no input
// panics, and none the check lets through makes the decoder allocate for
// lengths the bytes do not hold.
func FuzzDecodeRequests(f *testing.F) {
	seeds := []any{
		&dispatcher.DispatcherSubmitJobArgs{Req: &dispatcher.SubmitJobRequest{ModuleDigest: "sha256-00", Args_: []string{"--input", "x"}, Config: map[string]string{"k": "v"}}},
		&taskexecutor.TaskExecutorDeployTaskArgs{Req: &taskexecutor.TaskDeployment{Fencing: &common.FencingToken{JobId: "j"}, Chain: []*taskexecutor.Vertex{{Id: 1, Name: "src", Kind: "source", Connector: "text", Config: map[string]string{"k": "v"}}}, Inputs: []*taskexecutor.InputSpec{{ResultId: "r"}}}},
		&resourcemanager.ResourceManagerHeartbeatArgs{Req: &resourcemanager.HeartbeatRequest{ResourceId: "tm", SlotReport: []*resourcemanager.SlotStatus{{Index: 1}}, Metrics: map[string]int64{"m": 1}}},
		&jobmaster.JobMasterUpdateTaskStateArgs{Req: &jobmaster.TaskStateUpdate{Collected: [][]byte{[]byte("x")}}},
	}
	for _, s := range seeds {
		buf := make([]byte, frugal.EncodedSize(s))
		if _, err := frugal.EncodeObject(buf, nil, s); err != nil {
			f.Fatal(err)
		}
		f.Add(buf)
	}
	huge := []byte{12, 0, 1, 15, 0, 2, 11}
	f.Add(append(binary.BigEndian.AppendUint32(huge, 0x7fffffff), 0, 0))
	f.Add([]byte{12, 0, 1, 13, 0, 4, 11, 11, 0x7f, 0xff, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, b []byte) {
		n, err := rpcserver.CheckThriftStruct(b)
		if err != nil {
			return
		}
		if n > len(b) {
			t.Fatalf("checked %d bytes of %d", n, len(b))
		}
		for _, mk := range requestTypes {
			frugal.DecodeObject(b[:n], mk()) // errors are fine; panics and OOM are not
		}
	})
}

func TestCheckThriftRefusesLyingLengths(t *testing.T) {
	for name, b := range map[string][]byte{
		"list of 2^31-1":   append(binary.BigEndian.AppendUint32([]byte{12, 0, 1, 15, 0, 2, 11}, 0x7fffffff), 0, 0),
		"string of 2^31-1": binary.BigEndian.AppendUint32([]byte{11, 0, 1}, 0x7fffffff),
		"negative string":  binary.BigEndian.AppendUint32([]byte{11, 0, 1}, 0xffffffff),
		"map of 2^31-1":    binary.BigEndian.AppendUint32([]byte{13, 0, 4, 11, 11}, 0x7fffffff),
		"no stop":          {8, 0, 1, 0, 0, 0, 1},
	} {
		if _, err := rpcserver.CheckThriftStruct(b); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if n, err := rpcserver.CheckThriftStruct([]byte{8, 0, 1, 0, 0, 0, 1, 0}); err != nil || n != 8 {
		t.Fatalf("a good struct: %d %v", n, err)
	}
}
