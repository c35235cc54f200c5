package task

import (
	"context"
	"encoding/binary"
	"fmt"
	"time"

	"github.com/sluicehq/sluice/internal/abi"
	"github.com/sluicehq/sluice/sdk/nexmark"
)

// eventBatchBytes bounds one batch of generated events: larger than a
// batch of lines, since the generator makes events far faster than a
// reader splits lines and every guest call has its cost.
const eventBatchBytes = 4 * batchBytes

// runNexmark generates the events of the splits the JobMaster hands out
// (each a part of one timeline of the stream, sdk/nexmark.Split), in
// batches, each record timed with its event's time and without a key. Its
// position is the text source's: the splits finished and the rest of the
// one in progress, so a restore regenerates exactly the events not yet
// emitted. With a rate, it waits until each event is due.
func (t *task) runNexmark(ctx context.Context) error {
	head := &t.spec.Chain[0]
	set, err := head.Nexmark()
	if err != nil {
		return fmt.Errorf("task %s: vertex %d (%s): %w", t.spec.ExecutionID, head.ID, head.Name, err)
	}
	cfg := nexmark.Config{BaseTime: set.BaseTime, Rate: set.Rate, Seed: set.Seed, OutOfOrderGroup: set.OutOfOrderGroup}
	var b eventBatch
	flush := func() error {
		t.met.addIn(0, b.eventBytes)
		err := t.process(ctx, b.recs, b.encoded())
		b.reset()
		if err == nil {
			err = t.sourceTick(ctx, false)
		}
		return err
	}
	src := &source{flush: flush, position: t.textPosition}
	var e nexmark.Event
	for {
		if err := t.serveControl(ctx, src); err != nil {
			return err
		}
		waited := t.met.waitStart()
		sp, done, err := t.nextSplit(ctx, src)
		t.met.idleSince(waited)
		if err != nil {
			return err
		}
		if done {
			return flush()
		}
		start, timelines, err := nexmark.ParseSplitKey(sp.Key)
		if err != nil {
			return fmt.Errorf("task %s: %w", t.spec.ExecutionID, err)
		}
		g, err := nexmark.NewGenerator(cfg, nexmark.Range{Start: start, End: sp.Offset + sp.Length}, timelines, sp.Offset)
		if err != nil {
			return fmt.Errorf("task %s: split %s@%d+%d: %w", t.spec.ExecutionID, sp.Key, sp.Offset, sp.Length, err)
		}
		t.split, t.inSplit, t.nextOffset = sp, true, sp.Offset
		if t.et.splits != nil {
			t.et.split = sp.ID()
			t.et.splits.Add(t.et.split, time.Now())
		}
		// Pacing restarts with the split: a resumed timeline does not
		// rush to catch up with the time it was down.
		wall, due0 := time.Now(), g.Due()
		for g.Next(&e) {
			b.add(&e)
			t.nextOffset = g.Position()
			if len(b.recs) >= batchRecords || len(b.enc) >= eventBatchBytes {
				if err := flush(); err != nil {
					return err
				}
				if err := ctx.Err(); err != nil {
					return err
				}
			}
			if t.ctl.pending() {
				if err := t.serveControl(ctx, src); err != nil {
					return err
				}
			}
			if set.Rate > 0 {
				due := wall.Add(time.Duration((g.Due() - due0) * float64(time.Microsecond)))
				if err := t.waitDue(ctx, due, src, flush); err != nil {
					return err
				}
			}
		}
		t.finishedSplits = append(t.finishedSplits, sp.ID())
		t.inSplit = false
		if t.et.splits != nil {
			// The split's times count before it stops holding the
			// watermark back, as in runText.
			if err := flush(); err != nil {
				return err
			}
			t.et.splits.Remove(sp.ID())
		}
	}
}

// waitDue waits until a paced source's next event is due, handing the
// events it holds to the guest first; commands end the wait early.
func (t *task) waitDue(ctx context.Context, due time.Time, src *source, flush func() error) error {
	wait := time.Until(due)
	if wait <= 0 {
		return nil
	}
	if err := flush(); err != nil {
		return err
	}
	timer := time.NewTimer(wait)
	defer timer.Stop()
	defer t.met.idleSince(t.met.waitStart())
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.ctl.wake:
			if err := t.serveControl(ctx, src); err != nil {
				return err
			}
		case <-timer.C:
			return nil
		}
	}
}

// eventBatch gathers events in the ABI's batch encoding, each a record
// with its event time and no key, and as records that alias it, until
// reset (as lineBatch does for lines).
type eventBatch struct {
	enc        []byte
	recs       []abi.Record
	eventBytes int // the events' encodings, without the batch's framing
}

func (b *eventBatch) add(e *nexmark.Event) {
	if len(b.enc) == 0 {
		b.enc = append(b.enc, 0, 0, 0, 0)
	}
	ts := e.Time()
	b.enc = binary.LittleEndian.AppendUint64(append(b.enc, 1<<1), uint64(ts)) // flags: time
	at := len(b.enc)
	b.enc = nexmark.AppendEvent(append(b.enc, 0, 0, 0, 0), e)
	n := len(b.enc) - at - 4
	binary.LittleEndian.PutUint32(b.enc[at:], uint32(n))
	b.recs = append(b.recs, abi.Record{Time: ts, HasTime: true})
	// Set after appending: enc may have moved.
	b.recs[len(b.recs)-1].Value = b.enc[at+4 : len(b.enc) : len(b.enc)]
	b.eventBytes += n
}

// encoded returns the batch's encoding, nil when it is empty.
func (b *eventBatch) encoded() []byte {
	if len(b.recs) == 0 {
		return nil
	}
	binary.LittleEndian.PutUint32(b.enc, uint32(len(b.recs)))
	return b.enc
}

func (b *eventBatch) reset() {
	b.enc = b.enc[:0]
	clear(b.recs)
	b.recs = b.recs[:0]
	b.eventBytes = 0
}
