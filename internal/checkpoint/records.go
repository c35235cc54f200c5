package checkpoint

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/sluicehq/sluice/blob"
)

// With a job store (JobManager HA), a job's collect-sink records outlive
// the leader that held them:
//
//	tenants/<t>/results/<job>/released/<n>   the records checkpoint n released, written before its metadata
//	tenants/<t>/results/<job>/records        every record the job released, written when it ended
//
// A leader that recovers the job from checkpoint n reads released/ up to
// n; one that finds the job ended serves records.

// recordsMagic starts a records object; the version is its last byte.
var recordsMagic = []byte("SLREC\x01")

// maxRecordBytes bounds one record read back, so a damaged length cannot
// make the reader allocate without end.
const maxRecordBytes = 256 << 20

// EncodeRecords is a records object: a magic and version, then each record
// as its uvarint length and its bytes.
func EncodeRecords(recs [][]byte) []byte {
	n := len(recordsMagic)
	for _, r := range recs {
		n += binary.MaxVarintLen64 + len(r)
	}
	out := append(make([]byte, 0, n), recordsMagic...)
	for _, r := range recs {
		out = binary.AppendUvarint(out, uint64(len(r)))
		out = append(out, r...)
	}
	return out
}

// DecodeRecords reads a records object; the records alias b.
//
// # Errors
//
// An error saying where it is damaged: a missing magic or version, or a
// length past the end.
func DecodeRecords(b []byte) ([][]byte, error) {
	if !bytes.HasPrefix(b, recordsMagic) {
		return nil, errors.New("not a records object of this version")
	}
	b = b[len(recordsMagic):]
	recs := [][]byte{}
	for len(b) > 0 {
		n, w := binary.Uvarint(b)
		if w <= 0 || n > maxRecordBytes || n > uint64(len(b)-w) {
			return nil, fmt.Errorf("record %d: damaged length", len(recs))
		}
		recs = append(recs, b[w:w+int(n):w+int(n)])
		b = b[w+int(n):]
	}
	return recs, nil
}

// PutRecords writes recs as a records object at key.
func PutRecords(ctx context.Context, store blob.Store, key string, recs [][]byte) error {
	enc := EncodeRecords(recs)
	return store.Put(ctx, key, bytes.NewReader(enc), int64(len(enc)))
}

// GetRecords reads the records object at key.
//
// # Errors
//
// The store's errors (blob.ErrNotFound when there is none), or one saying
// the object is damaged.
func GetRecords(ctx context.Context, store blob.Store, key string) ([][]byte, error) {
	rc, err := store.Get(ctx, key)
	if err != nil {
		return nil, err
	}
	b, err := io.ReadAll(rc)
	rc.Close()
	if err != nil {
		return nil, err
	}
	recs, err := DecodeRecords(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", key, err)
	}
	return recs, nil
}

// ResultKeys are where a job's records are kept: its results directory,
// the object of every record it released, and the directory of what each
// checkpoint released.
func ResultKeys(tenant, job string) (dir, records, released string, err error) {
	keys, err := blob.ForTenant(tenant)
	if err != nil {
		return "", "", "", err
	}
	if dir, err = keys.Results(job); err != nil {
		return "", "", "", err
	}
	return dir, dir + "records", dir + "released/", nil
}

// ReleasedKey is the object of the records checkpoint n released.
func ReleasedKey(released string, n int64) string {
	return fmt.Sprintf("%s%020d", released, n)
}

// ReleasedThrough reads, in order, the records the checkpoints up to n
// released (objects of later checkpoints, whose metadata may never have
// been written, are left alone).
func ReleasedThrough(ctx context.Context, store blob.Store, released string, n int64) ([][]byte, error) {
	var recs [][]byte
	for o, err := range blob.All(ctx, store, released) {
		if err != nil {
			return nil, err
		}
		id, err := strconv.ParseInt(strings.TrimPrefix(o.Key, released), 10, 64)
		if err != nil || id > n {
			continue
		}
		rs, err := GetRecords(ctx, store, o.Key)
		if err != nil {
			return nil, err
		}
		recs = append(recs, rs...)
	}
	return recs, nil
}
