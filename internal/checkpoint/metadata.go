package checkpoint

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/bytedance/sonic"

	"github.com/sluicehq/sluice/blob"
)

// MetadataObject is the name of the object that makes a checkpoint exist.
const MetadataObject = "_metadata"

// metadataVersion is the version of the metadata format Encode writes.
const metadataVersion = 1

// maxMetadataBytes bounds a metadata object read back.
const maxMetadataBytes = 64 << 20

// ErrBadMetadata is returned for a metadata object that cannot be read.
var ErrBadMetadata = errors.New("bad checkpoint metadata")

// Metadata describes one completed checkpoint or savepoint.
type Metadata struct {
	Version int    `json:"version"`
	JobID   string `json:"job_id"`
	Tenant  string `json:"tenant"`
	// ID is the checkpoint number within its job.
	ID        int64 `json:"id"`
	Savepoint bool  `json:"savepoint,omitempty"`
	// SavepointID is the savepoint's own id (savepoints only).
	SavepointID    string `json:"savepoint_id,omitempty"`
	ModuleDigest   string `json:"module_digest"`
	MaxParallelism int    `json:"max_parallelism"`
	TriggeredMs    int64  `json:"triggered_ms"`
	CompletedMs    int64  `json:"completed_ms"`
	// Tasks are the subtask snapshots.
	Tasks []TaskState `json:"tasks"`
	// Sources are, per text-source vertex id, the splits still to read.
	Sources map[int][]Split `json:"sources,omitempty"`
	// Discovered are, per text source that follows its paths, the keys of
	// every object it has found (read, or among Sources): a restored job
	// reads only objects not among them. Per kafka source, the partitions
	// it knew (taken by a subtask, or among Sources): a restored job hands
	// out those created since.
	Discovered map[int][]string `json:"discovered,omitempty"`
	// SinkParts are the file-sink parts this checkpoint committed;
	// committing them again on restore is harmless.
	SinkParts []SinkPart `json:"sink_parts,omitempty"`
	// RecordsReleased is how many collect-sink records the job had
	// released once this checkpoint completed. A JobManager that restores
	// the checkpoint after a failover numbers the records the restored
	// tasks collect again from there, so a client reading the job's
	// records across the failover sees each once.
	RecordsReleased int64 `json:"records_released,omitempty"`
}

// Size is the bytes of state the checkpoint holds.
func (m *Metadata) Size() int64 {
	var n int64
	for _, t := range m.Tasks {
		n += t.State.Size
	}
	return n
}

// Encode returns m as JSON.
func (m *Metadata) Encode() ([]byte, error) {
	c := *m
	c.Version = metadataVersion
	return sonic.ConfigStd.Marshal(&c)
}

// Decode reads metadata written by Encode.
//
// # Errors
//
// ErrBadMetadata for bytes that are not metadata of a known version.
func Decode(b []byte) (*Metadata, error) {
	var m Metadata
	if err := sonic.ConfigStd.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadMetadata, err)
	}
	if m.Version != metadataVersion {
		return nil, fmt.Errorf("%w: version %d, want %d", ErrBadMetadata, m.Version, metadataVersion)
	}
	if m.ID < 1 || m.MaxParallelism < 1 {
		return nil, fmt.Errorf("%w: checkpoint id %d, max parallelism %d", ErrBadMetadata, m.ID, m.MaxParallelism)
	}
	return &m, nil
}

// WriteMetadata stores m as dir's metadata object; dir ends in "/".
func WriteMetadata(ctx context.Context, store blob.Store, dir string, m *Metadata) error {
	b, err := m.Encode()
	if err != nil {
		return fmt.Errorf("encode checkpoint %d metadata: %w", m.ID, err)
	}
	if err := store.Put(ctx, dir+MetadataObject, bytes.NewReader(b), int64(len(b))); err != nil {
		return fmt.Errorf("write checkpoint %d metadata: %w", m.ID, err)
	}
	return nil
}

// ReadMetadata reads dir's metadata object.
//
// # Errors
//
// blob.ErrNotFound (wrapped) when dir holds no metadata: the checkpoint
// does not exist; ErrBadMetadata; the store's errors.
func ReadMetadata(ctx context.Context, store blob.Store, dir string) (*Metadata, error) {
	rc, err := store.Get(ctx, dir+MetadataObject)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	b, err := io.ReadAll(io.LimitReader(rc, maxMetadataBytes+1))
	if err != nil {
		return nil, fmt.Errorf("read %s%s: %w", dir, MetadataObject, err)
	}
	if len(b) > maxMetadataBytes {
		return nil, fmt.Errorf("%w: %s%s is larger than %d bytes", ErrBadMetadata, dir, MetadataObject, maxMetadataBytes)
	}
	return Decode(b)
}

// DeletePrefix deletes every object under prefix, metadata first (so a
// partly deleted checkpoint no longer exists), and returns the first error.
func DeletePrefix(ctx context.Context, store blob.Store, prefix string) error {
	var first error
	if err := store.Delete(ctx, prefix+MetadataObject); err != nil && !errors.Is(err, blob.ErrNotFound) {
		first = err
	}
	var keys []string
	for o, err := range blob.All(ctx, store, prefix) {
		if err != nil {
			return err
		}
		keys = append(keys, o.Key)
	}
	for _, k := range keys {
		if err := store.Delete(ctx, k); err != nil && !errors.Is(err, blob.ErrNotFound) && first == nil {
			first = err
		}
	}
	return first
}

// Copy copies one object; savepoints copy a checkpoint's snapshots so the
// savepoint owns them.
func Copy(ctx context.Context, store blob.Store, from, to string) (int64, error) {
	rc, err := store.Get(ctx, from)
	if err != nil {
		return 0, err
	}
	defer rc.Close()
	st, err := store.Stat(ctx, from)
	if err != nil {
		return 0, err
	}
	if err := store.Put(ctx, to, rc, st.Size); err != nil {
		return 0, err
	}
	return st.Size, nil
}

// Commit makes file-sink parts visible: each pending object is copied to
// its final key, then deleted. It is idempotent: a part whose pending
// object is gone and whose final object exists is already committed.
//
// # Errors
//
// A part with neither object (it was lost), or the store's errors; parts
// before the failing one stay committed.
func Commit(ctx context.Context, store blob.Store, parts []SinkPart) error {
	for _, p := range parts {
		_, err := Copy(ctx, store, p.Pending, p.Final)
		if errors.Is(err, blob.ErrNotFound) {
			if _, serr := store.Stat(ctx, p.Final); serr == nil {
				continue
			}
			return fmt.Errorf("commit file-sink part %s: neither it nor %s exists", p.Pending, p.Final)
		}
		if err != nil {
			return fmt.Errorf("commit file-sink part %s: %w", p.Pending, err)
		}
		if err := store.Delete(ctx, p.Pending); err != nil && !errors.Is(err, blob.ErrNotFound) {
			return fmt.Errorf("commit file-sink part %s: delete pending: %w", p.Pending, err)
		}
	}
	return nil
}
