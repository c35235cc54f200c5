package auth

import (
	"errors"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/internal/jobconfig"
	"github.com/sluicehq/sluice/internal/jobgraph"
)

func TestPolicyConfigRules(t *testing.T) {
	for _, c := range []struct {
		name   string
		policy Policy
		conf   map[string]string
		// refused is the key the error must name; "" means allowed.
		refused string
	}{
		{"default allows plain keys", Policy{}, map[string]string{"execution.checkpointing.interval": "1s", "restart-strategy": "none"}, ""},
		{"default refuses the wall clock", Policy{}, map[string]string{"sandbox.clock": "wall"}, "sandbox.clock"},
		{"default allows the virtual clock", Policy{}, map[string]string{"sandbox.clock": "virtual"}, ""},
		{"inputs always", Policy{ConfigKeys: []string{"restart-strategy"}}, map[string]string{"inputs": `{"a":"tenants/a/uploads/x"}`}, ""},
		{"exact key any value", Policy{ConfigKeys: []string{"sandbox.clock"}}, map[string]string{"sandbox.clock": "wall"}, ""},
		{"key=value that value", Policy{ConfigKeys: []string{"sandbox.clock=wall"}}, map[string]string{"sandbox.clock": "wall"}, ""},
		{"key=value other value", Policy{ConfigKeys: []string{"restart-strategy=none"}}, map[string]string{"restart-strategy": "fixed-delay"}, "restart-strategy"},
		{"key=value compared as parsed", Policy{ConfigKeys: []string{"restart-strategy=none"}}, map[string]string{"restart-strategy": "off"}, ""},
		{"prefix", Policy{ConfigKeys: []string{"execution.checkpointing.*"}}, map[string]string{"execution.checkpointing.interval": "1s", "execution.checkpointing.timeout": "5s"}, ""},
		{"prefix is not a neighbour", Policy{ConfigKeys: []string{"execution.checkpointing.*"}}, map[string]string{"state.checkpoints.num-retained": "3"}, "state.checkpoints.num-retained"},
		{"list without the key", Policy{ConfigKeys: []string{"restart-strategy"}}, map[string]string{"restart-strategy": "none", "sandbox.clock": "virtual"}, "sandbox.clock"},
		{"star allows privileged", Policy{ConfigKeys: []string{"*"}}, map[string]string{"sandbox.clock": "wall"}, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			parsed, err := jobconfig.Parse(c.conf)
			if err != nil {
				t.Fatal(err)
			}
			err = c.policy.CheckConfig(c.conf, parsed)
			switch {
			case c.refused == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case c.refused != "" && err == nil:
				t.Fatalf("allowed, want %s refused", c.refused)
			case c.refused != "" && (!errors.Is(err, ErrNotAllowed) || !strings.Contains(err.Error(), "config "+c.refused+"=") || !strings.Contains(err.Error(), "tenants file")):
				t.Fatalf("error %q: want ErrNotAllowed naming %s and what to do", err, c.refused)
			}
		})
	}
}

func TestPolicyCheckpointFloor(t *testing.T) {
	p := Policy{MinCheckpointIntervalMs: 10_000}
	for iv, ok := range map[string]bool{"1s": false, "9999ms": false, "10s": true, "1m": true, "0": true} {
		conf := map[string]string{jobconfig.KeyCheckpointInterval: iv}
		parsed, err := jobconfig.Parse(conf)
		if err != nil {
			t.Fatal(err)
		}
		err = p.CheckConfig(conf, parsed)
		if ok != (err == nil) {
			t.Errorf("interval %s: %v, want allowed=%v", iv, err, ok)
		}
		if err != nil && (!errors.Is(err, ErrNotAllowed) || !strings.Contains(err.Error(), "min_checkpoint_interval_ms") || !strings.Contains(err.Error(), "10s")) {
			t.Errorf("interval %s: error %q does not name the floor", iv, err)
		}
	}
	if err := p.CheckConfig(nil, jobconfig.Default()); err != nil {
		t.Errorf("no checkpoints: %v", err)
	}
}

func TestPolicyConnectors(t *testing.T) {
	g := &jobgraph.Graph{Vertices: []jobgraph.Vertex{
		{ID: 1, Name: "read", Kind: jobgraph.KindSource, Connector: jobgraph.ConnectorText},
		{ID: 2, Name: "map", Kind: jobgraph.KindMap},
		{ID: 3, Name: "write", Kind: jobgraph.KindSink, Connector: jobgraph.ConnectorFile},
	}}
	if err := (Policy{}).CheckGraph(g); err != nil {
		t.Errorf("default: %v", err)
	}
	if err := (Policy{Connectors: []string{"text", "file"}}).CheckGraph(g); err != nil {
		t.Errorf("both allowed: %v", err)
	}
	err := Policy{Connectors: []string{"text", "collect"}}.CheckGraph(g)
	if !errors.Is(err, ErrNotAllowed) || !strings.Contains(err.Error(), `connector "file"`) || !strings.Contains(err.Error(), `"write"`) {
		t.Errorf("file refused: %v", err)
	}
}

func TestPolicyHosts(t *testing.T) {
	p := Policy{ConnectorHosts: []string{"kafka-1.internal:9092", "*.nats.example.com", "10.0.0.7", "[::1]:4222"}}
	for addr, ok := range map[string]bool{
		"kafka-1.internal:9092":     true,
		"KAFKA-1.internal.:9092":    true,
		"kafka-1.internal:9093":     false,
		"kafka-2.internal:9092":     false,
		"a.nats.example.com:4222":   true,
		"a.b.nats.example.com:1":    true,
		"nats.example.com:4222":     false,
		"evilnats.example.com:4222": false,
		"10.0.0.7:80":               true,
		"10.0.0.70:80":              false,
		"[::1]:4222":                true,
		"[::1]:4223":                false,
		"169.254.169.254:80":        false,
	} {
		if err := p.CheckHost(addr); ok != (err == nil) || (err != nil && !errors.Is(err, ErrNotAllowed)) {
			t.Errorf("CheckHost(%q) = %v, want allowed=%v", addr, err, ok)
		}
	}
	if err := (Policy{}).CheckHost("anything:1"); err != nil {
		t.Errorf("default: %v", err)
	}
}

func TestParseTenantsRefusesBadPolicies(t *testing.T) {
	for name, c := range map[string]struct{ policy, want string }{
		"unknown key":         {`{"config_keys":["sandbox.clok"]}`, `did you mean "sandbox.clock"`},
		"bad value":           {`{"config_keys":["sandbox.clock=sundial"]}`, `sandbox.clock`},
		"prefix of nothing":   {`{"config_keys":["nope.*"]}`, `no config key starts with "nope."`},
		"negative floor":      {`{"min_checkpoint_interval_ms":-1}`, "min_checkpoint_interval_ms"},
		"unknown connector":   {`{"connectors":["kafkaa"]}`, `"kafkaa"`},
		"host with scheme":    {`{"connector_hosts":["kafka://a:1"]}`, "scheme"},
		"inner wildcard":      {`{"connector_hosts":["a.*.com"]}`, "wildcard"},
		"bare wildcard":       {`{"connector_hosts":["*"]}`, "wildcard"},
		"bad port":            {`{"connector_hosts":["a.com:99999"]}`, "port"},
		"misspelt field":      {`{"conector_hosts":["a.com"]}`, `unknown field "conector_hosts"`},
		"wrong type of field": {`{"connectors":"text"}`, "want a JSON []string"},
	} {
		f := `{"tenants":[{"name":"a","policy":` + c.policy + `}]}`
		_, err := ParseTenants([]byte(f))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error with %q", name, err, c.want)
		}
		if err != nil && !strings.Contains(err.Error(), `"a"`) && !strings.Contains(err.Error(), "line ") {
			t.Errorf("%s: %v names neither the tenant nor the line", name, err)
		}
	}
	ts, err := ParseTenants([]byte(`{"tenants":[{"name":"a","policy":{"config_keys":["sandbox.clock=wall","execution.checkpointing.*","*"],"min_checkpoint_interval_ms":5000,"connectors":["text","collect"],"connector_hosts":["*.example.com:9092","[::1]"]}}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if p := ts.Policy("a"); p.MinCheckpointInterval().Seconds() != 5 || len(p.ConfigKeys) != 3 || len(p.ConnectorHosts) != 2 {
		t.Errorf("policy %+v", p)
	}
}

// TestPolicyJetStreamHosts: a JetStream connector may reach only the
// servers policy.connector_hosts names, every one of its URLs counted.
func TestPolicyJetStreamHosts(t *testing.T) {
	g := &jobgraph.Graph{Vertices: []jobgraph.Vertex{
		{ID: 1, Name: "bids", Kind: jobgraph.KindSource, Connector: jobgraph.ConnectorJetStreamSource,
			Config: map[string]string{jobgraph.ConfigNATSURL: "nats://a.nats.example.com:4222,nats://10.9.9.9:4222", "stream": "BIDS"}},
	}}
	if err := (Policy{}).CheckGraph(g); err != nil {
		t.Errorf("no host rule: %v", err)
	}
	err := Policy{ConnectorHosts: []string{"*.nats.example.com"}}.CheckGraph(g)
	if !errors.Is(err, ErrNotAllowed) || !strings.Contains(err.Error(), "10.9.9.9:4222") || !strings.Contains(err.Error(), `"bids"`) {
		t.Errorf("the second server refused: %v", err)
	}
	if err := (Policy{ConnectorHosts: []string{"*.nats.example.com", "10.9.9.9"}}).CheckGraph(g); err != nil {
		t.Errorf("both servers allowed: %v", err)
	}
}

// TestPolicyKafkaHosts: a Kafka connector may reach only the brokers
// policy.connector_hosts names, every seed broker counted.
func TestPolicyKafkaHosts(t *testing.T) {
	g := &jobgraph.Graph{Vertices: []jobgraph.Vertex{
		{ID: 1, Name: "out", Kind: jobgraph.KindSink, Connector: jobgraph.ConnectorKafkaSink,
			Config: map[string]string{jobgraph.ConfigKafkaBrokers: "k1.kafka.example.com:9092,10.9.9.9:9092", jobgraph.ConfigKafkaTopic: "counts"}},
	}}
	err := Policy{ConnectorHosts: []string{"*.kafka.example.com"}}.CheckGraph(g)
	if !errors.Is(err, ErrNotAllowed) || !strings.Contains(err.Error(), "10.9.9.9:9092") {
		t.Errorf("the second broker refused: %v", err)
	}
	if err := (Policy{ConnectorHosts: []string{"*.kafka.example.com", "10.9.9.9"}}).CheckGraph(g); err != nil {
		t.Errorf("both brokers allowed: %v", err)
	}
}
