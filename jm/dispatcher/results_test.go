package dispatcher

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/blob"
	"github.com/sluicehq/sluice/internal/checkpoint"
	"github.com/sluicehq/sluice/internal/rpcerr"
	"github.com/sluicehq/sluice/jm/ha"
	"github.com/sluicehq/sluice/jm/jobmaster"
)

// TestEndedJobsRecordsOutliveTheLeader: the records a finished job
// released, kept in the blob store with its outcome, are served by the
// next leader — whole by WaitJob, in pages by WaitRecords — and deleted
// with the outcome when the retention expires; a damaged records object
// reads as unavailable, not as an empty result.
func TestEndedJobsRecordsOutliveTheLeader(t *testing.T) {
	ctx := context.Background()
	mem := ha.NewMemory()
	l1, err := mem.Campaign(ctx)
	if err != nil {
		t.Fatal(err)
	}
	f1 := newFixture(t, func(c *Config) { c.Store, c.LeaderSession = l1, l1.Session() })
	// Two were dropped past the JobMaster's bound before it ended; one
	// record is empty.
	recs := [][]byte{[]byte("c\t3"), {}, []byte(strings.Repeat("x", 300))}
	const id, canceled, damaged = "00000000000000aa", "00000000000000bb", "00000000000000cc"
	for _, j := range []struct {
		id, state string
	}{{id, string(jobmaster.Finished)}, {canceled, string(jobmaster.Canceled)}, {damaged, string(jobmaster.Finished)}} {
		e := &ha.Ended{State: j.state, Start: f1.now.Now(), End: f1.now.Now()}
		r := jobmaster.Result{Records: recs, RecordsOffset: 2, RecordsTotal: 5}
		if err := f1.d.storeRecords(ctx, DefaultTenant, j.id, r, e); err != nil {
			t.Fatal(err)
		}
		if err := l1.PutJob(ctx, ha.Job{ID: j.id, Tenant: DefaultTenant, Ended: e}); err != nil {
			t.Fatal(err)
		}
	}
	_, key, _, _ := checkpoint.ResultKeys(DefaultTenant, damaged)
	if err := f1.store.Put(ctx, key, bytes.NewReader([]byte("SLREC\x01\xff\xff")), 8); err != nil {
		t.Fatal(err)
	}

	mem.Depose()
	l2, err := mem.Campaign(ctx)
	if err != nil {
		t.Fatal(err)
	}
	f2 := newFixture(t, func(c *Config) { c.Store, c.LeaderSession, c.Blob = l2, l2.Session(), f1.store })
	if err := f2.d.Recover(ctx); err != nil {
		t.Fatal(err)
	}
	r, err := f2.d.WaitJob(ctx, DefaultTenant, id, time.Second)
	if err != nil || r.State != jobmaster.Finished || r.RecordsOffset != 2 || r.RecordsTotal != 5 || !slices.EqualFunc(r.Records, recs, bytes.Equal) {
		t.Fatalf("WaitJob after the failover: records %q offset %d total %d, %v; want %q from 2 of 5", r.Records, r.RecordsOffset, r.RecordsTotal, err, recs)
	}
	for from := int64(0); from <= 6; from++ {
		r, err := f2.d.WaitRecords(ctx, DefaultTenant, id, from, time.Second)
		skip := min(max(from-2, 0), 3)
		if err != nil || r.RecordsOffset != 2+skip || !slices.EqualFunc(r.Records, recs[skip:], bytes.Equal) {
			t.Errorf("WaitRecords from %d: %q at %d, %v; want %q at %d", from, r.Records, r.RecordsOffset, err, recs[skip:], 2+skip)
		}
	}
	// A job that did not finish: WaitJob carries no records (as on the
	// leader that ran it), WaitRecords the released ones.
	if r, err := f2.d.WaitJob(ctx, DefaultTenant, canceled, 0); err != nil || len(r.Records) != 0 || r.RecordsOffset != 5 {
		t.Errorf("WaitJob of the canceled job: %q at %d, %v; want none, offset 5", r.Records, r.RecordsOffset, err)
	}
	if r, err := f2.d.WaitRecords(ctx, DefaultTenant, canceled, 0, 0); err != nil || len(r.Records) != 3 {
		t.Errorf("WaitRecords of the canceled job: %q, %v; want its 3", r.Records, err)
	}
	if _, err := f2.d.WaitRecords(ctx, "acme", id, 0, 0); !errors.Is(err, rpcerr.ErrJobNotFound) {
		t.Errorf("another tenant reads the records: %v", err)
	}
	if _, err := f2.d.WaitJob(ctx, DefaultTenant, damaged, 0); !errors.Is(err, rpcerr.ErrUnavailable) || !strings.Contains(err.Error(), "damaged") {
		t.Errorf("WaitJob of a job whose records are damaged: %v, want unavailable saying so", err)
	}

	f2.now.Add(2 * DefaultRetention)
	f2.d.expire()
	for _, j := range []string{id, canceled} {
		_, key, _, _ := checkpoint.ResultKeys(DefaultTenant, j)
		if _, err := f1.store.Stat(ctx, key); !errors.Is(err, blob.ErrNotFound) {
			t.Errorf("records of expired job %s: stat %v, want not found", j, err)
		}
	}
	if _, err := f2.d.WaitRecords(ctx, DefaultTenant, id, 0, 0); !errors.Is(err, rpcerr.ErrJobNotFound) {
		t.Errorf("records served after the retention: %v", err)
	}
}

// TestRecoveringJobIsUnavailable: while a new leader recovers the store's
// live jobs, a client asking for one of them is told to retry, not that
// the job is gone (an attached run would give up); another tenant still
// does not see it.
func TestRecoveringJobIsUnavailable(t *testing.T) {
	f := newFixture(t, nil)
	ctx := context.Background()
	const id = "00000000000000dd"
	f.d.mu.Lock()
	f.d.recovering = map[string]string{id: DefaultTenant}
	f.d.mu.Unlock()
	if _, err := f.d.WaitRecords(ctx, DefaultTenant, id, 0, 0); !errors.Is(err, rpcerr.ErrUnavailable) || !strings.Contains(err.Error(), "being recovered") {
		t.Errorf("records of a job being recovered: %v, want unavailable", err)
	}
	if _, err := f.d.GetJob(ctx, "acme", id); !errors.Is(err, rpcerr.ErrJobNotFound) {
		t.Errorf("another tenant asks for a job being recovered: %v, want not found", err)
	}
}
