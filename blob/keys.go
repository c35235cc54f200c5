package blob

import (
	"fmt"
	"strconv"
)

// Key scheme, tenant first so that one prefix (and one S3 policy) covers a
// tenant:
//
//	tenants/<tenant>/modules/sha256-<hex>.wasm
//	tenants/<tenant>/jobs/<job>/checkpoints/<n>/...
//	tenants/<tenant>/savepoints/<id>/...
//	tenants/<tenant>/results/<job>/...
//
// <n> is written with 20 digits, zero-padded, so that List returns
// checkpoints in numeric order and the last one listed is the latest.

const (
	maxTenantLen = 63
	maxIDLen     = 128
	digestPrefix = "sha256-"
	digestLen    = len(digestPrefix) + 64
)

// Keys builds the keys of one tenant. Get one from ForTenant; the zero
// Keys builds keys that ValidateKey rejects.
type Keys struct{ tenant string }

// ForTenant returns the key builder of tenant.
//
// # Errors
//
// ErrInvalidKey when tenant is not a valid tenant name (see ValidateTenant).
func ForTenant(tenant string) (Keys, error) {
	if err := ValidateTenant(tenant); err != nil {
		return Keys{}, err
	}
	return Keys{tenant: tenant}, nil
}

// ValidateTenant reports whether tenant is a valid tenant name: 1 to 63
// lowercase letters, digits and '-', starting and ending with a letter or
// digit (a DNS label, so it also fits bucket names and Kubernetes labels).
//
// # Errors
//
// The error wraps ErrInvalidKey and names the tenant and the rule.
func ValidateTenant(tenant string) error {
	ok := len(tenant) >= 1 && len(tenant) <= maxTenantLen &&
		tenant[0] != '-' && tenant[len(tenant)-1] != '-'
	for i := 0; ok && i < len(tenant); i++ {
		c := tenant[i]
		ok = c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-'
	}
	if !ok {
		return fmt.Errorf("%w: tenant %q: use 1 to %d lowercase letters, digits and '-', starting and ending with a letter or digit", ErrInvalidKey, tenant, maxTenantLen)
	}
	return nil
}

// ValidateID reports whether id is a valid job or savepoint id: 1 to 128
// ASCII letters, digits, '.', '_' and '-', starting with a letter or digit.
//
// # Errors
//
// The error wraps ErrInvalidKey and names the id and the rule.
func ValidateID(id string) error {
	ok := len(id) >= 1 && len(id) <= maxIDLen && isAlnum(id[0])
	for i := 1; ok && i < len(id); i++ {
		c := id[i]
		ok = isAlnum(c) || c == '.' || c == '_' || c == '-'
	}
	if !ok {
		return fmt.Errorf("%w: id %q: use 1 to %d letters, digits, '.', '_' and '-', starting with a letter or digit", ErrInvalidKey, id, maxIDLen)
	}
	return nil
}

// ValidateDigest reports whether d is a module digest: "sha256-" and 64
// lowercase hex digits.
//
// # Errors
//
// The error wraps ErrInvalidKey and names the digest.
func ValidateDigest(d string) error {
	ok := len(d) == digestLen && d[:len(digestPrefix)] == digestPrefix
	for i := len(digestPrefix); ok && i < len(d); i++ {
		c := d[i]
		ok = c >= '0' && c <= '9' || c >= 'a' && c <= 'f'
	}
	if !ok {
		return fmt.Errorf("%w: digest %q: want \"sha256-\" followed by 64 lowercase hex digits", ErrInvalidKey, d)
	}
	return nil
}

func isAlnum(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

// Tenant returns the tenant name.
func (k Keys) Tenant() string { return k.tenant }

// Prefix returns "tenants/<tenant>/", the prefix of all the tenant's keys.
func (k Keys) Prefix() string { return "tenants/" + k.tenant + "/" }

// Modules returns "tenants/<tenant>/modules/".
func (k Keys) Modules() string { return k.Prefix() + "modules/" }

// Savepoints returns "tenants/<tenant>/savepoints/".
func (k Keys) Savepoints() string { return k.Prefix() + "savepoints/" }

// Module returns the key of the module with digest:
// "tenants/<tenant>/modules/sha256-<hex>.wasm".
//
// # Errors
//
// ErrInvalidKey when digest is malformed (see ValidateDigest).
func (k Keys) Module(digest string) (string, error) {
	if err := ValidateDigest(digest); err != nil {
		return "", err
	}
	return k.Modules() + digest + ".wasm", nil
}

// Job returns "tenants/<tenant>/jobs/<job>/".
//
// # Errors
//
// ErrInvalidKey when job is not a valid id (see ValidateID).
func (k Keys) Job(job string) (string, error) {
	if err := ValidateID(job); err != nil {
		return "", err
	}
	return k.Prefix() + "jobs/" + job + "/", nil
}

// Checkpoints returns "tenants/<tenant>/jobs/<job>/checkpoints/".
//
// # Errors
//
// ErrInvalidKey when job is not a valid id.
func (k Keys) Checkpoints(job string) (string, error) {
	p, err := k.Job(job)
	if err != nil {
		return "", err
	}
	return p + "checkpoints/", nil
}

// Checkpoint returns "tenants/<tenant>/jobs/<job>/checkpoints/<n>/", with n
// zero-padded to 20 digits. Use Join to name objects inside it.
//
// # Errors
//
// ErrInvalidKey when job is not a valid id.
func (k Keys) Checkpoint(job string, n uint64) (string, error) {
	p, err := k.Checkpoints(job)
	if err != nil {
		return "", err
	}
	return p + fmt.Sprintf("%020d", n) + "/", nil
}

// ParseCheckpoint reads a checkpoint number written by Checkpoint (the
// 20-digit path segment).
//
// # Errors
//
// ErrInvalidKey when seg is not 20 decimal digits.
func ParseCheckpoint(seg string) (uint64, error) {
	n, err := strconv.ParseUint(seg, 10, 64)
	if err != nil || len(seg) != 20 {
		return 0, fmt.Errorf("%w: checkpoint segment %q: want 20 decimal digits", ErrInvalidKey, seg)
	}
	return n, nil
}

// Savepoint returns "tenants/<tenant>/savepoints/<id>/".
//
// # Errors
//
// ErrInvalidKey when id is not a valid id.
func (k Keys) Savepoint(id string) (string, error) {
	if err := ValidateID(id); err != nil {
		return "", err
	}
	return k.Savepoints() + id + "/", nil
}

// Results returns "tenants/<tenant>/results/<job>/".
//
// # Errors
//
// ErrInvalidKey when job is not a valid id.
func (k Keys) Results(job string) (string, error) {
	if err := ValidateID(job); err != nil {
		return "", err
	}
	return k.Prefix() + "results/" + job + "/", nil
}

// Join returns prefix+name and checks the result with ValidateKey; name may
// itself contain '/' ("task-3/state").
//
//	cp, _ := keys.Checkpoint("wordcount", 7)
//	key, err := blob.Join(cp, "_metadata")
//
// # Errors
//
// ErrInvalidKey when prefix is non-empty without a trailing '/', or the
// result is not a valid key.
func Join(prefix, name string) (string, error) {
	if prefix != "" && prefix[len(prefix)-1] != '/' {
		return "", fmt.Errorf("%w: prefix %q must end with '/'", ErrInvalidKey, prefix)
	}
	key := prefix + name
	if err := ValidateKey(key); err != nil {
		return "", err
	}
	return key, nil
}
