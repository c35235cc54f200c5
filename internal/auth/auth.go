package auth

import (
	"bytes"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice/blob"
)

// TokenPrefix starts every token `sluice tenant add` makes, so a leaked one
// is easy to find with a secret scanner.
const TokenPrefix = "slc_"

// Quotas bound what one tenant may use. A zero field means no limit of the
// tenant's own (the cluster's limits still apply).
type Quotas struct {
	// Slots is the most task slots the tenant's jobs may hold at once.
	Slots int `json:"slots,omitempty"`
	// RunningJobs is the most jobs the tenant may have that have not ended.
	RunningJobs int `json:"running_jobs,omitempty"`
	// SubmitsPerMinute is the most jobs the tenant may submit per minute
	// (a token bucket holding a sixth of it, at least 1: that many at
	// once, then one every 60/SubmitsPerMinute seconds).
	SubmitsPerMinute int `json:"submits_per_minute,omitempty"`
	// ModuleBytes is the largest module the tenant may upload.
	ModuleBytes int64 `json:"module_bytes,omitempty"`
	// MemoryBytes caps the linear memory of each of the tenant's Wasm
	// instances.
	MemoryBytes int64 `json:"memory_bytes,omitempty"`
	// CallTimeoutMs is the deadline of each guest call, in milliseconds.
	CallTimeoutMs int64 `json:"call_timeout_ms,omitempty"`
	// StateBytes is the most keyed and operator state one task may hold.
	StateBytes int64 `json:"state_bytes,omitempty"`
	// CPUWeight is the tenant's CPU share on each TaskManager, relative to
	// the other tenants whose guests run there: busy tenants' fuel stays in
	// the ratio of their weights (0 means 1; at most MaxCPUWeight).
	CPUWeight int `json:"cpu_weight,omitempty"`
	// FuelPerSecond caps the fuel the tenant's guests spend per second on
	// each TaskManager, all together.
	FuelPerSecond int64 `json:"fuel_per_second,omitempty"`
	// CallFuel is the fuel limit of each guest call: a call that runs this
	// many fuel checks fails, at the same place on every run (a job's
	// sandbox.call-fuel may only lower it).
	CallFuel int64 `json:"call_fuel,omitempty"`
}

// MaxCPUWeight bounds Quotas.CPUWeight: a share beyond ten thousand to one
// is no share.
const MaxCPUWeight = 10_000

// CallTimeout returns CallTimeoutMs as a duration.
func (q Quotas) CallTimeout() time.Duration { return time.Duration(q.CallTimeoutMs) * time.Millisecond }

// Tenant is one entry of the tenants file.
type Tenant struct {
	Name string `json:"name"`
	// TokenSHA256 are the lowercase hex SHA-256 hashes of the tenant's
	// tokens; several allow rotation.
	TokenSHA256 []string `json:"token_sha256"`
	Quotas      Quotas   `json:"quotas"`
	// Policy is what the tenant's jobs may ask for (config keys, a
	// checkpoint interval floor, connectors and their hosts).
	Policy Policy `json:"policy"`
}

// File is the tenants file: {"tenants": [...]}.
type File struct {
	Tenants []Tenant `json:"tenants"`
}

// Tenants answers which tenant a token belongs to. It is safe for
// concurrent use: every read sees one whole set of tenants, and Replace
// swaps in another at once (an atomic pointer, no lock), so a reloaded
// file reaches every holder of this *Tenants without a restart.
type Tenants struct {
	cur atomic.Pointer[tenantSet]
}

// tenantSet is one parsed tenants file; it never changes.
type tenantSet struct {
	byName map[string]Tenant
	hashes []tokenHash
}

type tokenHash struct {
	sum    [sha256.Size]byte
	tenant string
}

// ErrUnknownToken is returned by Lookup for a token no tenant holds.
var ErrUnknownToken = errors.New("unknown token")

// LoadTenants reads and parses a tenants file.
//
// # Errors
//
// As ParseTenants, with the path; or the file cannot be read.
func LoadTenants(path string) (*Tenants, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("tenants file: %w", err)
	}
	t, err := ParseTenants(b)
	if err != nil {
		return nil, fmt.Errorf("tenants file %s: %w", path, err)
	}
	return t, nil
}

// ParseTenants parses the JSON of a tenants file. The whole file is
// checked before anything is returned, so a caller replacing a running
// set with it changes nothing when it fails.
//
// # Errors
//
// Malformed JSON or a field the format does not have (with its line and
// column), a tenant name that is not a DNS label (blob.ValidateTenant), a
// name twice, a hash that is not 64 hex digits, the same hash for two
// tenants, a negative quota, a policy entry that names no config key,
// connector or host pattern (Policy), a cpu_weight above MaxCPUWeight. Each
// names the tenant.
func ParseTenants(b []byte) (*Tenants, error) {
	f, err := decodeFile(b)
	if err != nil {
		return nil, err
	}
	set := &tenantSet{byName: map[string]Tenant{}}
	owner := map[[sha256.Size]byte]string{}
	known := configKeys()
	for i, tn := range f.Tenants {
		if err := blob.ValidateTenant(tn.Name); err != nil {
			return nil, fmt.Errorf("tenant %d: %w", i+1, err)
		}
		if _, dup := set.byName[tn.Name]; dup {
			return nil, fmt.Errorf("tenant %q listed twice: merge its entries (token_sha256 takes several hashes)", tn.Name)
		}
		q := tn.Quotas
		if q.Slots < 0 || q.RunningJobs < 0 || q.SubmitsPerMinute < 0 || q.ModuleBytes < 0 || q.MemoryBytes < 0 || q.CallTimeoutMs < 0 || q.StateBytes < 0 ||
			q.FuelPerSecond < 0 || q.CallFuel < 0 {
			return nil, fmt.Errorf("tenant %q: quotas must be 0 (no limit) or more", tn.Name)
		}
		if err := tn.Policy.validate(known); err != nil {
			return nil, fmt.Errorf("tenant %q: policy: %w", tn.Name, err)
		}
		if q.CPUWeight < 0 || q.CPUWeight > MaxCPUWeight {
			return nil, fmt.Errorf("tenant %q: cpu_weight %d: want 1 to %d (0 or unset means 1)", tn.Name, q.CPUWeight, MaxCPUWeight)
		}
		for _, h := range tn.TokenSHA256 {
			raw, err := hex.DecodeString(strings.ToLower(h))
			if err != nil || len(raw) != sha256.Size {
				return nil, fmt.Errorf("tenant %q: token_sha256 %q is not 64 hex digits: store the hash sluice tenant add prints, not the token", tn.Name, h)
			}
			var sum [sha256.Size]byte
			copy(sum[:], raw)
			if o, dup := owner[sum]; dup {
				return nil, fmt.Errorf("tenants %q and %q share a token hash: give each its own token", o, tn.Name)
			}
			owner[sum] = tn.Name
			set.hashes = append(set.hashes, tokenHash{sum: sum, tenant: tn.Name})
		}
		set.byName[tn.Name] = tn
	}
	t := &Tenants{}
	t.cur.Store(set)
	return t, nil
}

// decodeFile decodes a tenants file strictly: a misspelt field would
// otherwise vanish, and in a policy that widens what a tenant may do. It
// uses encoding/json, whose errors carry the offset the message turns
// into a line and column (the file is small and read rarely).
func decodeFile(b []byte) (File, error) {
	var f File
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	err := dec.Decode(&f)
	if err == nil && dec.More() {
		err = errors.New("more than one JSON value: the file is one object, {\"tenants\": [...]}")
	}
	if err == nil {
		return f, nil
	}
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syn):
		return File{}, fmt.Errorf("%s: %w", position(b, syn.Offset), err)
	case errors.As(err, &typ):
		return File{}, fmt.Errorf("%s: field %s: want a JSON %s, not %s", position(b, typ.Offset), typ.Field, typ.Type, typ.Value)
	case errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF):
		return File{}, errors.New("the file ends before its JSON does: want {\"tenants\": [...]}")
	}
	// encoding/json gives an unknown field no offset: its first
	// occurrence locates it well enough.
	if name, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
		if i := bytes.Index(b, []byte(name)); i >= 0 {
			return File{}, fmt.Errorf("%s: unknown field %s: see docs/SECURITY.md for the fields of the tenants file", position(b, int64(i)), name)
		}
	}
	return File{}, fmt.Errorf("parse: %w", err)
}

// position is "line L, column C" of byte offset off of b (both from 1).
func position(b []byte, off int64) string {
	off = min(max(off, 0), int64(len(b)))
	before := b[:off]
	line := bytes.Count(before, []byte("\n")) + 1
	col := len(before) - bytes.LastIndexByte(before, '\n')
	return fmt.Sprintf("line %d, column %d", line, col)
}

// set is the current tenant set; nil for a nil or zero Tenants.
func (t *Tenants) set() *tenantSet {
	if t == nil {
		return nil
	}
	return t.cur.Load()
}

// Lookup returns the tenant holding token. Every stored hash is compared, in
// constant time, whatever matches.
//
// # Errors
//
// ErrUnknownToken.
func (t *Tenants) Lookup(token string) (Tenant, error) {
	s := t.set()
	if s == nil {
		return Tenant{}, ErrUnknownToken
	}
	sum := sha256.Sum256([]byte(token))
	found := ""
	for _, h := range s.hashes {
		if subtle.ConstantTimeCompare(sum[:], h.sum[:]) == 1 {
			found = h.tenant
		}
	}
	if found == "" {
		return Tenant{}, ErrUnknownToken
	}
	return s.byName[found], nil
}

// Quotas returns the quotas of tenant (zero for an unknown one).
func (t *Tenants) Quotas(tenant string) Quotas {
	if s := t.set(); s != nil {
		return s.byName[tenant].Quotas
	}
	return Quotas{}
}

// Policy returns the policy of tenant (the zero, default Policy for an
// unknown one).
func (t *Tenants) Policy(tenant string) Policy {
	if s := t.set(); s != nil {
		return s.byName[tenant].Policy
	}
	return Policy{}
}

// Names returns the names of the tenants, sorted.
func (t *Tenants) Names() []string {
	s := t.set()
	if s == nil {
		return nil
	}
	return slices.Sorted(maps.Keys(s.byName))
}

// Changes is what Replace changed, each list sorted.
type Changes struct {
	// Added and Removed are the tenants only the new set and only the old
	// set hold.
	Added, Removed []string
	// Changed are the tenants in both whose tokens, quotas or policy
	// differ.
	Changed []string
}

// Replace makes next's tenants the current ones, for every holder of t,
// at once: a call authenticated after Replace returns sees only next's
// tokens, quotas and policies. It returns what changed. Jobs already
// running are the caller's to judge (a removed tenant's are cancelled by
// the JobManager).
//
// # Errors
//
// An error when t or next is nil or holds no tenant set (a zero Tenants).
func (t *Tenants) Replace(next *Tenants) (Changes, error) {
	ns := next.set()
	if t == nil || ns == nil {
		return Changes{}, errors.New("replace tenants: no tenant set")
	}
	old := t.cur.Swap(ns)
	var c Changes
	for _, name := range slices.Sorted(maps.Keys(ns.byName)) {
		o, ok := old.byName[name]
		switch {
		case !ok:
			c.Added = append(c.Added, name)
		case !sameTenant(o, ns.byName[name]):
			c.Changed = append(c.Changed, name)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(old.byName)) {
		if _, ok := ns.byName[name]; !ok {
			c.Removed = append(c.Removed, name)
		}
	}
	return c, nil
}

// sameTenant compares two entries of one tenant.
func sameTenant(a, b Tenant) bool {
	return slices.Equal(a.TokenSHA256, b.TokenSHA256) && a.Quotas == b.Quotas && a.Policy.equal(b.Policy)
}

// NewToken returns a new random token: TokenPrefix and 32 bytes from
// crypto/rand in unpadded base64url.
func NewToken() string {
	b := make([]byte, 32)
	rand.Read(b) // never fails (crypto/rand, Go 1.24+)
	return TokenPrefix + base64.RawURLEncoding.EncodeToString(b)
}

// HashToken returns the lowercase hex SHA-256 of token, as the tenants file
// stores it.
func HashToken(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:])
}

// Secret is the cluster secret. Members never send it: they send proofs
// derived from it (HMAC-SHA256 of a fixed label), one per channel, so a
// proof seen on one channel does not open the other.
type Secret struct{ key []byte }

// Labels of the derived proofs.
const (
	labelRPC  = "sluice cluster rpc v1"
	labelData = "sluice data port v1"
)

// NewSecret wraps secret bytes. Surrounding white space is dropped (files
// end in a newline); an empty secret is an error.
func NewSecret(b []byte) (*Secret, error) {
	b = []byte(strings.TrimSpace(string(b)))
	if len(b) == 0 {
		return nil, errors.New("cluster secret is empty")
	}
	if len(b) < 16 {
		return nil, fmt.Errorf("cluster secret is %d bytes: use at least 16 (e.g. openssl rand -hex 32)", len(b))
	}
	return &Secret{key: b}, nil
}

// LoadSecret reads the cluster secret from path, or, when path is empty,
// from the environment variable env. Neither set gives (nil, nil): the
// cluster is open.
func LoadSecret(path, env string) (*Secret, error) {
	if path != "" {
		b, err := os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("cluster secret: %w", err)
		}
		return NewSecret(b)
	}
	if v := os.Getenv(env); v != "" {
		return NewSecret([]byte(v))
	}
	return nil, nil
}

func (s *Secret) derive(label string) []byte {
	m := hmac.New(sha256.New, s.key)
	m.Write([]byte(label))
	return m.Sum(nil)
}

// RPCProof is what a member sends in its calls' metadata (hex). A nil
// Secret gives "".
func (s *Secret) RPCProof() string {
	if s == nil {
		return ""
	}
	return hex.EncodeToString(s.derive(labelRPC))
}

// DataToken is the HELLO token of the data port. A nil Secret gives nil.
func (s *Secret) DataToken() []byte {
	if s == nil {
		return nil
	}
	return s.derive(labelData)
}

// CheckRPC reports whether proof is this secret's RPC proof (constant time).
// A nil Secret accepts everything.
func (s *Secret) CheckRPC(proof string) bool {
	if s == nil {
		return true
	}
	return hmac.Equal([]byte(proof), []byte(s.RPCProof()))
}

// CheckData reports whether a HELLO token is this secret's data token. A
// nil Secret accepts everything.
func (s *Secret) CheckData(token []byte) bool {
	if s == nil {
		return true
	}
	return hmac.Equal(token, s.DataToken())
}
