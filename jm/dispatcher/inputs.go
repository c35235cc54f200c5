package dispatcher

import (
	"context"
	"errors"
	"fmt"
	"path"
	"slices"
	"strings"

	"github.com/sluicehq/sluice/blob"
	"github.com/sluicehq/sluice/internal/checkpoint"
	"github.com/sluicehq/sluice/internal/jobgraph"
	"github.com/sluicehq/sluice/internal/rpcerr"
	"github.com/sluicehq/sluice/sdk/nexmark"
)

// Limits of input resolution, so one submission cannot make the JobManager
// hold an unbounded split list.
const (
	maxInputObjects = 100_000
	maxSplits       = 1_000_000
)

// Split sizing: a text source's input is cut into about splitsPerSubtask
// splits per source subtask, so every subtask gets work and a subtask that
// finishes early takes over splits of a slower one, but never into splits
// smaller than minSplitSize (each split costs a request to the JobMaster and
// an object read) nor larger than the configured split size.
const (
	splitsPerSubtask = 4
	minSplitSize     = 256 << 10
)

// splitSizeFor returns the split size for total input bytes read by
// subtasks source subtasks, at most maxSize.
func splitSizeFor(total int64, subtasks int, maxSize int64) int64 {
	lo := min(int64(minSplitSize), maxSize)
	size := total / int64(splitsPerSubtask*max(subtasks, 1))
	return min(max(size, lo), maxSize)
}

// resolveSplits cuts every nexmark source's events into one split per
// subtask (nexmarkSplits), lists the partitions of every kafka source
// (kafkaSplits), and lists the objects every text source of g
// reads and cuts them into splits, in key order: splitSizeFor gives the size, from the
// source's total input and parallelism (p is the job's default), with
// maxSplitSize the largest.
//
// A text source's "paths" config is a JSON list of strings. Each path is
// first looked up in inputs, the job's inputs map (jobconfig.KeyInputs);
// what comes out (or the path itself) names blob keys of the job's tenant:
//
//   - "tenants/<tenant>/..." is a key as is; another tenant's key is refused;
//     any other path is relative to "tenants/<tenant>/";
//   - with a glob (*, ?, [), every object whose key matches (path.Match);
//   - ending in "/", every object under that prefix;
//   - else the object with that key, or if there is none, every object
//     under key + "/" (a directory).
//
// # Errors
//
// ErrInvalidArgument for a malformed paths list or key;
// ErrNotFound when a path names nothing; ErrPermissionDenied for another
// tenant's keys; the blob store's errors otherwise.
func resolveSplits(ctx context.Context, store blob.Store, tenant string, g *jobgraph.Graph, inputs map[string]string, p int, maxSplitSize int64) (map[int][]checkpoint.Split, error) {
	out := map[int][]checkpoint.Split{}
	total := 0
	for _, v := range g.Vertices {
		if v.Connector == jobgraph.ConnectorNexmark {
			splits, err := nexmarkSplits(&v, jobgraph.ParallelismOf(&v, p))
			if err != nil {
				return nil, err
			}
			out[v.ID] = splits
			continue
		}
		if v.Connector == jobgraph.ConnectorKafkaSource {
			splits, err := kafkaSplits(ctx, &v)
			if err != nil {
				return nil, err
			}
			out[v.ID] = splits
			continue
		}
		if v.Connector != jobgraph.ConnectorText {
			continue
		}
		objs, err := textObjects(ctx, store, tenant, &v, inputs)
		if err != nil {
			return nil, err
		}
		var bytes int64
		for _, o := range objs {
			bytes += o.Size
		}
		splitSize := splitSizeFor(bytes, jobgraph.ParallelismOf(&v, p), maxSplitSize)
		var splits []checkpoint.Split
		for _, o := range objs {
			for off := int64(0); off < o.Size; off += splitSize {
				splits = append(splits, checkpoint.Split{Key: o.Key, Offset: off, Length: min(splitSize, o.Size-off)})
			}
		}
		total += len(splits)
		if total > maxSplits {
			return nil, rpcerr.Errorf(rpcerr.ErrInvalidArgument, "vertex %d %q: more than %d input splits: raise the split size", v.ID, v.Name, maxSplits)
		}
		out[v.ID] = splits
	}
	return out, nil
}

// textObjects lists the objects text source v reads now, in key order.
// For a source that follows its paths (jobgraph.ConfigMonitorInterval) a
// path that names nothing yet is no error: it is waited for, as Flink's
// continuous FileSource does.
func textObjects(ctx context.Context, store blob.Store, tenant string, v *jobgraph.Vertex, inputs map[string]string) ([]blob.Info, error) {
	paths, err := v.SourcePaths()
	if err != nil {
		return nil, rpcerr.Errorf(rpcerr.ErrInvalidArgument, "vertex %d %q: text source needs a non-empty JSON list of paths in its \"paths\" config", v.ID, v.Name)
	}
	_, follow, err := v.MonitorInterval()
	if err != nil {
		return nil, rpcerr.Errorf(rpcerr.ErrInvalidArgument, "vertex %d %q: %v", v.ID, v.Name, err)
	}
	var objs []blob.Info
	for _, p := range paths {
		found, err := resolvePath(ctx, store, tenant, p, inputs)
		if follow && errors.Is(err, rpcerr.ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("vertex %d %q: %w", v.ID, v.Name, err)
		}
		objs = append(objs, found...)
		if len(objs) > maxInputObjects {
			return nil, rpcerr.Errorf(rpcerr.ErrInvalidArgument, "vertex %d %q: more than %d input objects", v.ID, v.Name, maxInputObjects)
		}
	}
	slices.SortFunc(objs, func(a, b blob.Info) int { return strings.Compare(a.Key, b.Key) })
	return slices.CompactFunc(objs, func(a, b blob.Info) bool { return a.Key == b.Key }), nil
}

// discoverer is the jobmaster.Config.Discover of a job: it lists what
// each following text source reads now and cuts every object into splits
// on its own (a relist mostly finds one object or a few), or the
// partitions a kafka source reads now, the JobMaster keeping those it has
// not seen.
func discoverer(store blob.Store, tenant string, g *jobgraph.Graph, inputs map[string]string, p int, maxSplitSize int64) func(ctx context.Context, vertex int) ([]checkpoint.Split, error) {
	return func(ctx context.Context, vertex int) ([]checkpoint.Split, error) {
		i := slices.IndexFunc(g.Vertices, func(v jobgraph.Vertex) bool { return v.ID == vertex })
		if i < 0 {
			return nil, rpcerr.Errorf(rpcerr.ErrNotFound, "no vertex %d", vertex)
		}
		v := &g.Vertices[i]
		if v.Connector == jobgraph.ConnectorKafkaSource {
			return kafkaSplits(ctx, v)
		}
		objs, err := textObjects(ctx, store, tenant, v, inputs)
		if err != nil {
			return nil, err
		}
		var splits []checkpoint.Split
		for _, o := range objs {
			size := splitSizeFor(o.Size, jobgraph.ParallelismOf(v, p), maxSplitSize)
			for off := int64(0); off < o.Size; off += size {
				splits = append(splits, checkpoint.Split{Key: o.Key, Offset: off, Length: min(size, o.Size-off)})
			}
		}
		return splits, nil
	}
}

// nexmarkSplits cuts a nexmark source's events into one timeline per
// subtask (sdk/nexmark.Split): split i holds event ids Offset to
// Offset+Length, and its key names its timeline, so its rest after a
// checkpoint still knows where that began.
func nexmarkSplits(v *jobgraph.Vertex, parallelism int) ([]checkpoint.Split, error) {
	set, err := v.Nexmark()
	if err != nil {
		return nil, rpcerr.Errorf(rpcerr.ErrInvalidArgument, "vertex %d %q: %v", v.ID, v.Name, err)
	}
	ranges, err := nexmark.Split(set.Events, parallelism)
	if err != nil {
		return nil, rpcerr.Errorf(rpcerr.ErrInvalidArgument, "vertex %d %q: %v", v.ID, v.Name, err)
	}
	splits := make([]checkpoint.Split, 0, len(ranges))
	for _, r := range ranges {
		if r.End > r.Start {
			splits = append(splits, checkpoint.Split{Key: nexmark.SplitKey(r, len(ranges)), Offset: r.Start, Length: r.End - r.Start})
		}
	}
	return splits, nil
}

func resolvePath(ctx context.Context, store blob.Store, tenant, p string, inputs map[string]string) ([]blob.Info, error) {
	if strings.TrimSpace(p) == "" {
		return nil, rpcerr.Errorf(rpcerr.ErrInvalidArgument, "input path is empty")
	}
	name := p
	if mapped, ok := inputs[p]; ok {
		name = mapped
	}
	keys, err := blob.ForTenant(tenant)
	if err != nil {
		return nil, rpcerr.Errorf(rpcerr.ErrInvalidArgument, "%v", err)
	}
	root := keys.Prefix()
	var key string
	switch {
	case strings.HasPrefix(name, root):
		key = name
	case strings.HasPrefix(name, "tenants/"):
		return nil, rpcerr.Errorf(rpcerr.ErrPermissionDenied, "input %q: blob key %q belongs to another tenant", p, name)
	default:
		key = root + strings.TrimLeft(name, "/")
	}
	if i := strings.IndexAny(key, "*?["); i >= 0 {
		if _, err := path.Match(key, ""); err != nil {
			return nil, rpcerr.Errorf(rpcerr.ErrInvalidArgument, "input %q: bad pattern: %v", p, err)
		}
		prefix := key[:strings.LastIndex(key[:i], "/")+1]
		var found []blob.Info
		for info, err := range blob.All(ctx, store, prefix) {
			if err != nil {
				return nil, storeErr(p, err)
			}
			if ok, _ := path.Match(key, info.Key); ok {
				found = append(found, info)
			}
		}
		if len(found) == 0 {
			return nil, rpcerr.Errorf(rpcerr.ErrNotFound, "input %q: no object matches %s", p, key)
		}
		return found, nil
	}
	if !strings.HasSuffix(key, "/") {
		info, err := store.Stat(ctx, key)
		if err == nil {
			return []blob.Info{info}, nil
		}
		if !errors.Is(err, blob.ErrNotFound) {
			return nil, storeErr(p, err)
		}
		key += "/"
	}
	var found []blob.Info
	for info, err := range blob.All(ctx, store, key) {
		if err != nil {
			return nil, storeErr(p, err)
		}
		found = append(found, info)
	}
	if len(found) == 0 {
		return nil, rpcerr.Errorf(rpcerr.ErrNotFound, "input %q: no object %s and none under %s: upload the input to the blob store first", p, strings.TrimSuffix(key, "/"), key)
	}
	return found, nil
}

// storeErr classifies a blob store error met while resolving input p.
func storeErr(p string, err error) error {
	switch {
	case errors.Is(err, blob.ErrInvalidKey):
		return rpcerr.Errorf(rpcerr.ErrInvalidArgument, "input %q: %w", p, err)
	case errors.Is(err, blob.ErrNotFound):
		return rpcerr.Errorf(rpcerr.ErrNotFound, "input %q: %w", p, err)
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return fmt.Errorf("input %q: %w", p, err)
	}
	return rpcerr.Errorf(rpcerr.ErrUnavailable, "input %q: blob store: %w", p, err)
}
