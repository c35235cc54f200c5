package dispatcher

import (
	"context"
	"strings"
	"time"

	"github.com/sluicehq/sluice/blob"
	"github.com/sluicehq/sluice/internal/rpcerr"
)

// Module is one module a tenant uploaded.
type Module struct {
	Digest   string // "sha256-<hex>"
	Size     int64
	Uploaded time.Time // when it was last stored
}

// ListModules returns the tenant's modules in digest order.
//
// # Errors
//
// ErrInvalidArgument for a malformed tenant name; the blob store's errors
// as ErrUnavailable.
func (d *Dispatcher) ListModules(ctx context.Context, tenant string) ([]Module, error) {
	keys, err := blob.ForTenant(tenant)
	if err != nil {
		return nil, rpcerr.Errorf(rpcerr.ErrInvalidArgument, "tenant %q: %v", tenant, err)
	}
	prefix := keys.Modules()
	out := []Module{}
	for o, err := range blob.All(ctx, d.cfg.Blob, prefix) {
		if err != nil {
			return nil, classifyBlob("list modules", err)
		}
		digest, ok := strings.CutSuffix(strings.TrimPrefix(o.Key, prefix), ".wasm")
		if !ok || blob.ValidateDigest(digest) != nil {
			continue // not a module the Dispatcher stored
		}
		out = append(out, Module{Digest: digest, Size: o.Size, Uploaded: o.ModTime})
	}
	return out, nil
}
