package jobgraph

import (
	"fmt"
	"strings"
)

// SecretRef starts a host connector's config value that names a job
// secret rather than holding it: "secret:nats-password" is replaced, at
// submission, by the value of the job config key "secret.nats-password"
// (jobconfig.Config.Secrets). A job graph comes from the guest's plan,
// which `sluice plan` prints and a module carries; so a connector's
// secret keys (SecretKey) take only references, and the values travel in
// the job config, which nothing prints.
const SecretRef = "secret:"

// MaxSecretNameBytes bounds a secret's name.
const MaxSecretNameBytes = 64

// secretKeys are the config keys of each host connector that hold secrets.
var secretKeys = map[string][]string{
	ConnectorJetStreamSource: {ConfigNATSToken, ConfigNATSPassword},
	ConnectorJetStreamSink:   {ConfigNATSToken, ConfigNATSPassword},
	ConnectorKafkaSource:     {ConfigKafkaPassword},
	ConnectorKafkaSink:       {ConfigKafkaPassword},
}

// SecretKey reports whether key holds a secret in the config of the host
// connector connector.
func SecretKey(connector, key string) bool {
	for _, k := range secretKeys[connector] {
		if k == key {
			return true
		}
	}
	return false
}

// SecretName returns the name a config value references and true, or
// false when the value is not a reference.
func SecretName(val string) (string, bool) {
	return strings.CutPrefix(val, SecretRef)
}

// BadSecretName says what is wrong with a secret's name, or "" when it is
// one: 1 to MaxSecretNameBytes of a-z, A-Z, 0-9, '.', '_' and '-'.
func BadSecretName(name string) string {
	switch {
	case name == "":
		return "is empty"
	case len(name) > MaxSecretNameBytes:
		return fmt.Sprintf("is %d bytes long, above the limit of %d", len(name), MaxSecretNameBytes)
	}
	if i := badNameByte(name); i >= 0 {
		return fmt.Sprintf("has %q at byte %d: use letters, digits, '.', '_' and '-'", name[i], i)
	}
	return ""
}

// badNameByte is the index of the first byte of name that is not one of
// a-z, A-Z, 0-9, '.', '_' and '-' (the alphabet of secret names and of
// Kafka's topic names), or -1.
func badNameByte(name string) int {
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '.' || c == '_' || c == '-') {
			return i
		}
	}
	return -1
}

// ResolveSecrets replaces every secret reference in the config of g's host
// connectors by the secret's value, from secrets (name to value).
//
// # Errors
//
// An error naming the operator and the key, never a value, for a
// connector's secret key given literally, a reference to a secret that
// secrets does not hold or with a bad name, and a reference in a guest
// operator's config (secrets are for host connectors only: a guest could
// print them). g is unchanged when there is an error.
func ResolveSecrets(g *Graph, secrets map[string]string) error {
	type set struct {
		v        *Vertex
		key, val string
	}
	var sets []set
	var probs []string
	for i := range g.Vertices {
		v := &g.Vertices[i]
		for _, k := range sortedConfigKeys(v.Config) {
			val := v.Config[k]
			name, ref := SecretName(val)
			at := fmt.Sprintf("operator %d (%s): config %q", v.ID, v.Name, k)
			switch {
			case !ref && SecretKey(v.Connector, k) && val != "":
				probs = append(probs, fmt.Sprintf("%s holds a secret literally, where `sluice plan` would show it: write %q and pass the value in the job config as %q (sluice run --job-secret NAME=FILE)",
					at, SecretRef+"NAME", "secret.NAME"))
			case !ref:
			case v.Connector == "":
				probs = append(probs, fmt.Sprintf("%s names a secret, but only host connectors read secrets", at))
			case BadSecretName(name) != "":
				probs = append(probs, fmt.Sprintf("%s names secret %q, which %s", at, name, BadSecretName(name)))
			default:
				s, ok := secrets[name]
				if !ok {
					probs = append(probs, fmt.Sprintf("%s names secret %q, which the job config does not hold: pass it as secret.%s (sluice run --job-secret %s=FILE)", at, name, name, name))
					continue
				}
				sets = append(sets, set{v, k, s})
			}
		}
	}
	if len(probs) > 0 {
		return fmt.Errorf("%w: %s", ErrInvalidGraph, strings.Join(probs, "; "))
	}
	for _, s := range sets {
		s.v.Config[s.key] = s.val
	}
	return nil
}
