package jobgraph

import (
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// Host connectors for NATS JetStream (docs/ABI.md section 5).
const (
	// ConnectorJetStreamSource reads one JetStream stream by sequence; the
	// next sequence is the source's position in the checkpoint.
	ConnectorJetStreamSource = "jetstream-source"
	// ConnectorJetStreamSink publishes each record's value to a subject,
	// exactly once through deduplicated publishes after the checkpoint
	// completes (or at least once, published at once).
	ConnectorJetStreamSink = "jetstream-sink"
)

// Vertex config keys of the JetStream connectors. Secrets (token,
// password) are never echoed by the errors below.
const (
	// ConfigNATSURL is a comma-separated list of server URLs
	// (nats://host:port, tls://host:port for TLS with the system's roots).
	ConfigNATSURL = "url"
	// ConfigNATSToken is a token to authenticate with (a secret).
	ConfigNATSToken = "token"
	// ConfigNATSUser and ConfigNATSPassword authenticate by user and
	// password (the password is a secret).
	ConfigNATSUser     = "user"
	ConfigNATSPassword = "password"
	// ConfigJetStreamStream is the stream a source reads.
	ConfigJetStreamStream = "stream"
	// ConfigJetStreamSubject is a source's subject filter (optional) or a
	// sink's subject (required, without wildcards).
	ConfigJetStreamSubject = "subject"
	// ConfigJetStreamStart is where a source without a checkpoint starts:
	// "first" (the default), "new", "seq:N" or "time:RFC3339".
	ConfigJetStreamStart = "start"
	// ConfigJetStreamDelivery is a sink's guarantee: "exactly-once" (the
	// default) or "at-least-once".
	ConfigJetStreamDelivery = "delivery"
)

// Sink delivery guarantees (ConfigJetStreamDelivery).
const (
	DeliveryExactlyOnce = "exactly-once"
	DeliveryAtLeastOnce = "at-least-once"
)

// JetStreamStart is where a source starts when no checkpoint says.
type JetStreamStart struct {
	Kind string    // "first", "new", "seq" or "time"
	Seq  uint64    // Kind "seq": the first sequence to read (at least 1)
	Time time.Time // Kind "time": the first message at or after it
}

// JetStreamSettings are a JetStream connector's settings, from its config.
type JetStreamSettings struct {
	URLs     []string
	Token    string
	User     string
	Password string
	Stream   string // sources
	Subject  string // a source's filter (may be empty), a sink's subject
	Start    JetStreamStart
	Delivery string // sinks: DeliveryExactlyOnce or DeliveryAtLeastOnce
}

// String shows the settings without their secrets.
func (s JetStreamSettings) String() string {
	return fmt.Sprintf("url=%s stream=%q subject=%q", strings.Join(s.URLs, ","), s.Stream, s.Subject)
}

// JetStream returns a JetStream connector's settings from its config.
//
// # Errors
//
// An error naming the key (never a secret's value) when the URL list is
// missing or malformed, the stream name is missing (sources) or invalid, a
// subject is invalid (a sink's is required and has no wildcards), the
// start or the delivery is not one of its forms, or the config has a key
// the connector does not know.
func (v *Vertex) JetStream() (JetStreamSettings, error) {
	sink := v.Connector == ConnectorJetStreamSink
	what := "jetstream source"
	if sink {
		what = "jetstream sink"
	}
	s := JetStreamSettings{Start: JetStreamStart{Kind: "first"}, Delivery: DeliveryExactlyOnce}
	for _, k := range sortedConfigKeys(v.Config) {
		val := v.Config[k]
		switch {
		case k == ConfigNATSURL:
			for _, u := range strings.Split(val, ",") {
				u = strings.TrimSpace(u)
				if err := checkNATSURL(u); err != nil {
					return JetStreamSettings{}, fmt.Errorf("%s: %s: %w", what, k, err)
				}
				s.URLs = append(s.URLs, u)
			}
		case k == ConfigNATSToken:
			s.Token = val
		case k == ConfigNATSUser:
			s.User = val
		case k == ConfigNATSPassword:
			s.Password = val
		case k == ConfigJetStreamStream && !sink:
			s.Stream = val
		case k == ConfigJetStreamSubject:
			s.Subject = val
		case k == ConfigJetStreamStart && !sink:
			st, err := parseJetStreamStart(val)
			if err != nil {
				return JetStreamSettings{}, fmt.Errorf("%s: %s: %w", what, k, err)
			}
			s.Start = st
		case k == ConfigJetStreamDelivery && sink:
			if val != DeliveryExactlyOnce && val != DeliveryAtLeastOnce {
				return JetStreamSettings{}, fmt.Errorf("%s: %s %q: want %q or %q", what, k, val, DeliveryExactlyOnce, DeliveryAtLeastOnce)
			}
			s.Delivery = val
		case k == ConfigPoisonRecords:
		default:
			return JetStreamSettings{}, fmt.Errorf("%s: unknown config key %q", what, k)
		}
	}
	switch {
	case len(s.URLs) == 0:
		return JetStreamSettings{}, fmt.Errorf("%s: no server: set %q to a URL such as nats://127.0.0.1:4222", what, ConfigNATSURL)
	case s.Token != "" && (s.User != "" || s.Password != ""):
		return JetStreamSettings{}, fmt.Errorf("%s: set either %q or %q and %q, not both", what, ConfigNATSToken, ConfigNATSUser, ConfigNATSPassword)
	}
	if !sink {
		if why := badStreamName(s.Stream); why != "" {
			return JetStreamSettings{}, fmt.Errorf("%s: stream %q %s", what, s.Stream, why)
		}
		if s.Subject != "" {
			if why := badSubject(s.Subject, true); why != "" {
				return JetStreamSettings{}, fmt.Errorf("%s: subject filter %q %s", what, s.Subject, why)
			}
		}
		return s, nil
	}
	if why := badSubject(s.Subject, false); why != "" {
		return JetStreamSettings{}, fmt.Errorf("%s: subject %q %s: use a subject such as \"orders.totals\"", what, s.Subject, why)
	}
	return s, nil
}

func checkNATSURL(u string) error {
	if u == "" {
		return fmt.Errorf("an empty URL: use nats://host:port")
	}
	if !strings.Contains(u, "://") {
		u = "nats://" + u
	}
	p, err := url.Parse(u)
	if err != nil {
		// url's error quotes the URL, which may hold a password.
		return fmt.Errorf("a malformed URL: use nats://host:port")
	}
	switch p.Scheme {
	case "nats", "tls", "ws", "wss":
	default:
		return fmt.Errorf("scheme %q: use nats://, tls://, ws:// or wss://", p.Scheme)
	}
	if p.Hostname() == "" {
		return fmt.Errorf("a URL without a host: use %s://host:port", p.Scheme)
	}
	if port := p.Port(); port != "" {
		if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
			return fmt.Errorf("port %q is not from 1 to 65535", port)
		}
	}
	if p.User != nil {
		return fmt.Errorf("credentials in the URL: set %q, or %q and %q, instead", ConfigNATSToken, ConfigNATSUser, ConfigNATSPassword)
	}
	return nil
}

func parseJetStreamStart(val string) (JetStreamStart, error) {
	switch {
	case val == "first" || val == "new":
		return JetStreamStart{Kind: val}, nil
	case strings.HasPrefix(val, "seq:"):
		n, err := strconv.ParseUint(val[4:], 10, 64)
		if err != nil || n < 1 {
			return JetStreamStart{}, fmt.Errorf("%q: want seq:N with N a sequence from 1", val)
		}
		return JetStreamStart{Kind: "seq", Seq: n}, nil
	case strings.HasPrefix(val, "time:"):
		t, err := time.Parse(time.RFC3339Nano, val[5:])
		if err != nil {
			return JetStreamStart{}, fmt.Errorf("%q: want time: and an RFC 3339 time such as time:2026-12-02T15:04:05Z", val)
		}
		return JetStreamStart{Kind: "time", Time: t}, nil
	}
	return JetStreamStart{}, fmt.Errorf("%q: want first, new, seq:N or time:RFC3339", val)
}

// badStreamName says what is wrong with a stream name, "" if nothing.
func badStreamName(n string) string {
	switch {
	case n == "":
		return fmt.Sprintf("is empty: set %q to the stream's name", ConfigJetStreamStream)
	case len(n) > 255:
		return "is longer than 255 bytes"
	case strings.ContainsAny(n, " \t\r\n.*>/\\"):
		return "has whitespace, '.', '*', '>', '/' or '\\', which a stream name cannot hold"
	}
	return ""
}

// badSubject says what is wrong with a subject, "" if nothing; wildcards
// ('*' tokens, a last '>' token) are allowed in a filter.
func badSubject(s string, wildcards bool) string {
	if s == "" {
		return fmt.Sprintf("is empty: set %q", ConfigJetStreamSubject)
	}
	if strings.ContainsAny(s, " \t\r\n") {
		return "has whitespace"
	}
	toks := strings.Split(s, ".")
	for i, tok := range toks {
		switch {
		case tok == "":
			return "has an empty token (a leading, trailing or doubled '.')"
		case tok == "*" || (tok == ">" && i == len(toks)-1):
			if !wildcards {
				return "has a wildcard, which a published subject cannot hold"
			}
		case strings.ContainsAny(tok, "*>"):
			return fmt.Sprintf("has a token %q with a wildcard character inside it", tok)
		}
	}
	return ""
}
