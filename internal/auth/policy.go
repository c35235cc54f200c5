package auth

import (
	"errors"
	"fmt"
	"maps"
	"net"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/sluicehq/sluice/internal/jobconfig"
	"github.com/sluicehq/sluice/internal/jobgraph"
)

// Policy says what one tenant's jobs may ask for, beside its Quotas. The
// zero Policy is the default: every job config key with any value except
// the privileged settings (see ConfigKeys), any checkpoint interval,
// every host connector and any connector host.
type Policy struct {
	// ConfigKeys are the job config settings the tenant may make. An
	// entry is "key" (any value of it), "key=value" (that value only,
	// compared as the job config reads it), "prefix.*" (every key under
	// prefix) or "*" (every key, privileged settings too). Empty means
	// every key except the privileged settings, which today is
	// sandbox.clock=wall: the wall clock makes a replay see other times
	// than the first run and gives a guest a timer to measure its
	// neighbours with. The inputs key is always allowed: sluice run sets
	// it for local files, and every blob key it maps is checked against
	// the tenant's own prefix anyway. So are the secret.NAME keys: a
	// tenant's secrets grant nothing beyond what its connectors (checked
	// by Connectors and ConnectorHosts) reach.
	ConfigKeys []string `json:"config_keys,omitempty"`
	// MinCheckpointIntervalMs is the shortest checkpoint interval
	// (execution.checkpointing.interval) the tenant's jobs may set, in
	// milliseconds: each checkpoint writes state to the blob store that
	// every tenant shares. Checkpoints off is always allowed. 0 means no
	// floor beyond the job config's own (10ms).
	MinCheckpointIntervalMs int64 `json:"min_checkpoint_interval_ms,omitempty"`
	// Connectors are the host connectors (internal/jobgraph: text,
	// collect, file, ...) the tenant's jobs may use. Empty means all.
	Connectors []string `json:"connectors,omitempty"`
	// ConnectorHosts are the network addresses the tenant's connectors
	// may reach, as "host", "host:port", "*.domain" or "*.domain:port"
	// (a pattern without a port allows every port; "*.domain" matches
	// names below domain, not domain itself). Empty means any host. A
	// connector that dials out checks each address with CheckHost.
	ConnectorHosts []string `json:"connector_hosts,omitempty"`
}

// ErrNotAllowed is wrapped by every error of Policy's checks: the tenant's
// policy forbids what the job asked for.
var ErrNotAllowed = errors.New("not allowed by the tenant's policy")

// askOperator ends every refusal: only the cluster operator can change a
// policy.
const askOperator = "ask the cluster operator to allow it in the tenants file"

// CheckConfig judges a job's config as submitted (conf) and as parsed
// (parsed, from jobconfig.Parse(conf)): every key it sets must be allowed
// by ConfigKeys, and its checkpoint interval must not be below
// MinCheckpointIntervalMs.
//
// # Errors
//
// ErrNotAllowed, wrapped with the first refused key (in sorted order),
// its value and the rule.
func (p Policy) CheckConfig(conf map[string]string, parsed jobconfig.Config) error {
	for _, k := range slices.Sorted(maps.Keys(conf)) {
		if !p.allowsSetting(k, conf[k]) {
			rule := "it is privileged"
			if len(p.ConfigKeys) > 0 {
				rule = fmt.Sprintf("policy.config_keys allows only %s", quoteList(p.ConfigKeys))
			}
			return fmt.Errorf("config %s=%q: %w (%s): %s", k, conf[k], ErrNotAllowed, rule, askOperator)
		}
	}
	if iv, floor := parsed.Checkpoints.Interval, p.MinCheckpointInterval(); iv > 0 && iv < floor {
		return fmt.Errorf("config %s=%v: %w: below the tenant's floor of %v (policy.min_checkpoint_interval_ms): checkpoint every %v or less often, or leave checkpoints off",
			jobconfig.KeyCheckpointInterval, iv, ErrNotAllowed, floor, floor)
	}
	return nil
}

// MinCheckpointInterval is MinCheckpointIntervalMs as a duration.
func (p Policy) MinCheckpointInterval() time.Duration {
	return time.Duration(p.MinCheckpointIntervalMs) * time.Millisecond
}

// CheckGraph judges a job's graph: every host connector it uses must be
// in Connectors (when that is set), and every server a network connector
// reaches must be in ConnectorHosts (when that is set).
//
// # Errors
//
// ErrNotAllowed, wrapped with the first vertex whose connector or server
// is refused.
func (p Policy) CheckGraph(g *jobgraph.Graph) error {
	if g == nil {
		return nil
	}
	for i := range g.Vertices {
		v := &g.Vertices[i]
		if len(p.Connectors) > 0 && v.Connector != "" && !slices.Contains(p.Connectors, v.Connector) {
			return fmt.Errorf("vertex %d %q uses connector %q: %w (policy.connectors allows only %s): %s",
				v.ID, v.Name, v.Connector, ErrNotAllowed, quoteList(p.Connectors), askOperator)
		}
		if len(p.ConnectorHosts) == 0 {
			continue
		}
		for _, addr := range connectorAddrs(v) {
			if err := p.CheckHost(addr); err != nil {
				return fmt.Errorf("vertex %d %q: %w", v.ID, v.Name, err)
			}
		}
	}
	return nil
}

// connectorAddrs are the servers a network connector vertex names
// (host:port or a bare host); none for another vertex, or for a config
// that Validate refuses.
func connectorAddrs(v *jobgraph.Vertex) []string {
	var addrs []string
	switch v.Connector {
	case jobgraph.ConnectorJetStreamSource, jobgraph.ConnectorJetStreamSink:
		s, err := v.JetStream()
		if err != nil {
			return nil
		}
		for _, raw := range s.URLs {
			if u, err := url.Parse(raw); err == nil {
				addrs = append(addrs, u.Host)
			}
		}
	case jobgraph.ConnectorKafkaSource, jobgraph.ConnectorKafkaSink:
		if s, err := v.Kafka(); err == nil {
			addrs = s.Brokers
		}
	}
	return addrs
}

// CheckHost judges an address a connector is about to reach ("host:port",
// "[v6]:port" or a bare host) against ConnectorHosts. Names compare
// without case and without a trailing dot.
//
// # Errors
//
// ErrNotAllowed, wrapped with the address and the allowed patterns.
func (p Policy) CheckHost(addr string) error {
	if len(p.ConnectorHosts) == 0 {
		return nil
	}
	host, port := splitAddr(addr)
	for _, pat := range p.ConnectorHosts {
		if hostMatches(pat, host, port) {
			return nil
		}
	}
	return fmt.Errorf("connector host %q: %w (policy.connector_hosts allows only %s): %s", addr, ErrNotAllowed, quoteList(p.ConnectorHosts), askOperator)
}

// allowsSetting reports whether the tenant may set key to value.
func (p Policy) allowsSetting(key, value string) bool {
	if key == jobconfig.KeyInputs || strings.HasPrefix(key, jobconfig.KeySecretPrefix) {
		return true
	}
	cv := canonical(key, value)
	if len(p.ConfigKeys) == 0 {
		return !privileged(key, cv)
	}
	for _, e := range p.ConfigKeys {
		if entryMatches(e, key, cv) {
			return true
		}
	}
	return false
}

// privileged reports the settings only an explicit ConfigKeys entry
// allows.
func privileged(key, canonicalValue string) bool {
	return key == jobconfig.KeyClock && canonicalValue == string(jobconfig.ClockWall)
}

// canonical is value as the job config reads it ("" for the default), so
// that "sandbox.clock=wall" in a policy and a job's spelling of the same
// setting compare equal. A value that does not parse stays as it is (the
// submission fails on it anyway).
func canonical(key, value string) string {
	c, err := jobconfig.Parse(map[string]string{key: value})
	if err != nil {
		return value
	}
	return c.Map()[key]
}

func entryMatches(entry, key, canonicalValue string) bool {
	if entry == "*" {
		return true
	}
	if prefix, ok := strings.CutSuffix(entry, ".*"); ok {
		return strings.HasPrefix(key, prefix+".")
	}
	k, v, hasValue := strings.Cut(entry, "=")
	return k == key && (!hasValue || canonical(k, v) == canonicalValue)
}

// configKeys is the set of job config key names, for validate.
func configKeys() map[string]bool {
	known := map[string]bool{}
	for _, k := range jobconfig.Keys() {
		known[k.Name] = true
	}
	return known
}

// validate checks every entry of the policy names something that exists,
// so a typo is an error at load, not a silent rule. known is configKeys().
func (p Policy) validate(known map[string]bool) error {
	for _, e := range p.ConfigKeys {
		if err := validateConfigEntry(e, known); err != nil {
			return fmt.Errorf("config_keys entry %q: %w", e, err)
		}
	}
	if p.MinCheckpointIntervalMs < 0 {
		return fmt.Errorf("min_checkpoint_interval_ms %d: want 0 (no floor) or more", p.MinCheckpointIntervalMs)
	}
	for _, c := range p.Connectors {
		if _, ok := jobgraph.ConnectorKind(c); !ok {
			return fmt.Errorf("connectors entry %q: no such host connector (known: %s, %s, %s, ...)", c, jobgraph.ConnectorText, jobgraph.ConnectorCollect, jobgraph.ConnectorFile)
		}
	}
	for _, h := range p.ConnectorHosts {
		if err := validateHostPattern(h); err != nil {
			return fmt.Errorf("connector_hosts entry %q: %w", h, err)
		}
	}
	return nil
}

func validateConfigEntry(e string, known map[string]bool) error {
	if e == "*" {
		return nil
	}
	if prefix, ok := strings.CutSuffix(e, ".*"); ok {
		for k := range known {
			if strings.HasPrefix(k, prefix+".") {
				return nil
			}
		}
		return fmt.Errorf("no config key starts with %q (README.md lists the job config keys)", prefix+".")
	}
	k, v, hasValue := strings.Cut(e, "=")
	if !known[k] {
		_, err := jobconfig.Parse(map[string]string{k: v})
		return err // names the nearest known key
	}
	if hasValue {
		if _, err := jobconfig.Parse(map[string]string{k: v}); err != nil {
			return err
		}
	}
	return nil
}

func validateHostPattern(pat string) error {
	if pat == "" || strings.ContainsAny(pat, " \t/@?#") {
		return errors.New(`want "host", "host:port", "*.domain" or "*.domain:port", without a scheme or path`)
	}
	host, port := splitAddr(pat)
	if port != "" {
		if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
			return fmt.Errorf("port %q: want 1 to 65535", port)
		}
	}
	if rest, _ := strings.CutPrefix(host, "*."); rest == "" || strings.Contains(rest, "*") {
		return errors.New(`a wildcard is only a leading "*." before a domain`)
	}
	return nil
}

// splitAddr splits "host:port" (or "[v6]:port", or a bare host) into a
// lowercase host without a trailing dot and the port ("" when none).
func splitAddr(addr string) (host, port string) {
	h, p, err := net.SplitHostPort(addr)
	if err != nil {
		h, p = strings.TrimSuffix(strings.TrimPrefix(addr, "["), "]"), ""
	}
	return strings.TrimSuffix(strings.ToLower(h), "."), p
}

func hostMatches(pattern, host, port string) bool {
	ph, pp := splitAddr(pattern)
	if pp != "" && pp != port {
		return false
	}
	if suffix, ok := strings.CutPrefix(ph, "*"); ok {
		return strings.HasSuffix(host, suffix) && len(host) > len(suffix)
	}
	return ph == host
}

func (p Policy) equal(o Policy) bool {
	return slices.Equal(p.ConfigKeys, o.ConfigKeys) && p.MinCheckpointIntervalMs == o.MinCheckpointIntervalMs &&
		slices.Equal(p.Connectors, o.Connectors) && slices.Equal(p.ConnectorHosts, o.ConnectorHosts)
}

// quoteList is l as `"a", "b"`, for messages.
func quoteList(l []string) string {
	q := make([]string, len(l))
	for i, s := range l {
		q[i] = strconv.Quote(s)
	}
	return strings.Join(q, ", ")
}
