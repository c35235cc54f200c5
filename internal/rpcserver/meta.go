package rpcserver

import (
	"context"

	"github.com/bytedance/gopkg/cloud/metainfo"
	"github.com/cloudwego/kitex/pkg/endpoint"
)

// Metadata keys a call carries in its TTHeader (never in the Thrift body, so
// the IDL stays free of credentials). Both travel in cleartext: see
// docs/SECURITY.md.
const (
	// MetaToken is the bearer token of a client call (a tenant's token).
	MetaToken = "SLUICE_TOKEN"
	// MetaPeer is the cluster-secret proof of a call between cluster
	// members (TaskManager ⇄ JobManager).
	MetaPeer = "SLUICE_PEER"
)

// Incoming returns the value of key in the metadata of the call ctx serves.
func Incoming(ctx context.Context, key string) (string, bool) {
	return metainfo.GetValue(ctx, key)
}

// withMetadata is the client middleware that puts md into every call's
// TTHeader.
func withMetadata(md map[string]string) endpoint.Middleware {
	return func(next endpoint.Endpoint) endpoint.Endpoint {
		return func(ctx context.Context, req, resp any) error {
			for k, v := range md {
				ctx = metainfo.WithValue(ctx, k, v)
			}
			return next(ctx, req, resp)
		}
	}
}
