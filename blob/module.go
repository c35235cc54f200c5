package blob

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"hash"
	"io"
	"os"
)

// spoolMem is how much of a module PutModule keeps in memory before it
// spills to a temporary file.
const spoolMem = 4 << 20

// Digest returns the module digest of p: "sha256-<hex>".
func Digest(p []byte) string {
	sum := sha256.Sum256(p)
	return digestPrefix + hex.EncodeToString(sum[:])
}

// PutModule stores the module read from r under its content address,
// tenants/<tenant>/modules/sha256-<hex>.wasm, and returns that digest and
// the module's size.
//
// PutModule streams: it hashes r while spooling it (in memory up to 4 MiB,
// then to a temporary file in os.TempDir, removed before return), then
// stores the spooled bytes with one atomic Put. Memory stays bounded, and
// the object under a digest key always has that digest: a failure leaves no
// object, never a partial one. When an object of the same size already
// exists under the key, nothing is written (deduplication). Callers enforce
// size quotas by limiting r (io.LimitReader).
//
// # Errors
//
//   - ErrInvalidKey: tenant is not a valid tenant name.
//   - ErrInvalidArgument: the module is empty.
//   - A read error from r is returned wrapped, with Kind nil.
//   - As Store.Stat and Store.Put.
func PutModule(ctx context.Context, s Store, tenant string, r io.Reader) (digest string, size int64, err error) {
	fail := func(kind error, msg string, err error) (string, int64, error) {
		return "", 0, &Error{Op: "put module", Key: tenant, Kind: kind, Msg: msg, Err: err}
	}
	keys, err := ForTenant(tenant)
	if err != nil {
		return fail(nil, "", err)
	}
	sp := &spool{}
	defer sp.close()
	h := sha256.New()
	size, err = io.Copy(io.MultiWriter(h, sp), ctxReader{ctx, r})
	if err != nil {
		if sp.werr != nil {
			return fail(nil, "cannot spool the module to a temporary file", sp.werr)
		}
		if ctx.Err() != nil {
			return fail(nil, "", ctx.Err())
		}
		return fail(nil, "reading the module failed; nothing was stored", err)
	}
	if size == 0 {
		return fail(ErrInvalidArgument, "the module is empty", nil)
	}
	digest = digestPrefix + hex.EncodeToString(h.Sum(nil))
	key, _ := keys.Module(digest) // digest is well-formed by construction

	switch info, err := s.Stat(ctx, key); {
	case err == nil && info.Size == size:
		return digest, size, nil // already stored
	case err != nil && !errors.Is(err, ErrNotFound):
		return "", 0, err
	}
	// Missing, or present with the wrong size (corrupt): write it.
	body, err := sp.reader()
	if err != nil {
		return fail(nil, "cannot read back the spooled module", err)
	}
	if err := s.Put(ctx, key, body, size); err != nil {
		return "", 0, err
	}
	return digest, size, nil
}

// GetModule opens the module with digest and verifies it while it is read:
// the reader returns an error wrapping ErrDigestMismatch instead of io.EOF
// when the bytes do not hash to digest, so a caller that reads to the end
// never accepts corrupt bytes. A caller that stops early has verified
// nothing.
//
// # Errors
//
//   - ErrInvalidKey: tenant or digest is malformed.
//   - ErrNotFound: the tenant has no module with that digest.
//   - As Store.Get; while reading, ErrDigestMismatch.
func GetModule(ctx context.Context, s Store, tenant, digest string) (io.ReadCloser, error) {
	keys, err := ForTenant(tenant)
	if err != nil {
		return nil, &Error{Op: "get module", Key: tenant, Err: err}
	}
	key, err := keys.Module(digest)
	if err != nil {
		return nil, &Error{Op: "get module", Key: digest, Err: err}
	}
	rc, err := s.Get(ctx, key)
	if err != nil {
		return nil, err
	}
	return &verifyReader{rc: rc, h: sha256.New(), want: digest, key: key}, nil
}

// verifyReader hashes what it reads and checks the digest at EOF.
type verifyReader struct {
	rc   io.ReadCloser
	h    hash.Hash
	want string
	key  string
	err  error // sticky: set once EOF has been checked
}

func (v *verifyReader) Read(p []byte) (int, error) {
	if v.err != nil {
		return 0, v.err
	}
	n, err := v.rc.Read(p)
	v.h.Write(p[:n])
	if err == io.EOF {
		if got := digestPrefix + hex.EncodeToString(v.h.Sum(nil)); got != v.want {
			err = &Error{Op: "get module", Key: v.key, Kind: ErrDigestMismatch,
				Msg: "the stored bytes hash to " + got + "; the object is corrupt: upload the module again"}
		}
		v.err = err
	}
	return n, err
}

func (v *verifyReader) Close() error { return v.rc.Close() }

// ctxReader stops reading once ctx ends.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}

// spool holds written bytes in memory up to spoolMem, then in a temporary
// file.
type spool struct {
	mem  []byte
	f    *os.File
	werr error // the spool's own write error, told apart from the source's
}

func (s *spool) Write(p []byte) (int, error) {
	if s.f == nil && len(s.mem)+len(p) <= spoolMem {
		s.mem = append(s.mem, p...)
		return len(p), nil
	}
	if s.f == nil {
		f, err := os.CreateTemp("", "sluice-module-*")
		if err != nil {
			s.werr = err
			return 0, err
		}
		s.f = f
		if _, err := f.Write(s.mem); err != nil {
			s.werr = err
			return 0, err
		}
		s.mem = nil
	}
	n, err := s.f.Write(p)
	if err != nil {
		s.werr = err
	}
	return n, err
}

// reader returns the spooled bytes from the start, as an io.ReaderAt and
// io.Seeker so the s3 backend can retry and upload parts in parallel.
func (s *spool) reader() (io.Reader, error) {
	if s.f == nil {
		return bytes.NewReader(s.mem), nil
	}
	if _, err := s.f.Seek(0, io.SeekStart); err != nil {
		return nil, err
	}
	return s.f, nil
}

func (s *spool) close() {
	if s.f != nil {
		s.f.Close()
		os.Remove(s.f.Name())
	}
}
