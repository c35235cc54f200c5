package kafkaconn_test

import (
	"context"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/internal/testutil"
)

// TestTxnOffsetMarker pins the broker behaviour the exactly-once sink's
// design relies on (not built yet; see the kafka branch's report): an
// offset committed for a group no consumer joins, inside a transaction
// (AddOffsetsToTxn + TxnOffsetCommit), becomes visible exactly when the
// transaction's records do, so "the last checkpoint whose records were
// committed" can be read back after a restore; an aborted transaction
// leaves it as it was.
func TestTxnOffsetMarker(t *testing.T) {
	k := testutil.StartKafka(t, 1, "out")
	ctx := context.Background()
	cl, err := kgo.NewClient(kgo.SeedBrokers(k.Brokers), kgo.TransactionalID("p-0"))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	tds, err := adm.ListTopics(ctx, "out")
	if err != nil {
		t.Fatal(err)
	}
	const group = "p-0-marker"
	txn := func(mark int64, end kgo.TransactionEndTry) {
		t.Helper()
		if err := cl.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "out", Value: []byte("x")}).FirstErr(); err != nil {
			t.Fatal(err)
		}
		id, epoch, err := cl.ProducerID(ctx)
		if err != nil {
			t.Fatal(err)
		}
		add := kmsg.NewPtrAddOffsetsToTxnRequest()
		add.TransactionalID, add.ProducerID, add.ProducerEpoch, add.Group = "p-0", id, epoch, group
		if ar, err := add.RequestWith(ctx, cl); err != nil || ar.ErrorCode != 0 {
			t.Fatalf("AddOffsetsToTxn: %v, code %v", err, ar)
		}
		tc := kmsg.NewPtrTxnOffsetCommitRequest()
		tc.TransactionalID, tc.ProducerID, tc.ProducerEpoch, tc.Group, tc.Generation = "p-0", id, epoch, group, -1
		tt := kmsg.NewTxnOffsetCommitRequestTopic()
		tt.Topic, tt.TopicID = "out", tds["out"].ID
		p := kmsg.NewTxnOffsetCommitRequestTopicPartition()
		p.Partition, p.Offset = 0, mark
		tt.Partitions = append(tt.Partitions, p)
		tc.Topics = append(tc.Topics, tt)
		tr, err := tc.RequestWith(ctx, cl)
		if err != nil || len(tr.Topics) != 1 || tr.Topics[0].Partitions[0].ErrorCode != 0 {
			t.Fatalf("TxnOffsetCommit: %v, %+v", err, tr)
		}
		if err := cl.EndTransaction(ctx, end); err != nil {
			t.Fatal(err)
		}
	}
	marker := func() int64 {
		t.Helper()
		offs, err := adm.FetchOffsets(ctx, group)
		if err != nil {
			t.Fatal(err)
		}
		o, ok := offs.Lookup("out", 0)
		if !ok {
			t.Fatal("no marker")
		}
		return o.At
	}
	txn(7, kgo.TryCommit)
	if m := marker(); m != 7 {
		t.Fatalf("marker after a commit: %d, want 7", m)
	}
	txn(9, kgo.TryAbort)
	if m := marker(); m != 7 {
		t.Fatalf("marker after an abort: %d, want 7 still", m)
	}
}
