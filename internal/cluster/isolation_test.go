package cluster_test

import (
	"context"
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/auth"
	"github.com/sluicehq/sluice/internal/cluster"
	"github.com/sluicehq/sluice/internal/cluster/clustertest"
	"github.com/sluicehq/sluice/jm"
	"github.com/sluicehq/sluice/sdk/client"
)

const (
	isoTokenA = "slc_isolation-test-tenant-a"
	isoTokenB = "slc_isolation-test-tenant-b"
)

// tenantCluster is an embedded cluster with tenants a (no quotas) and b
// (a 500ms call deadline and 64 MiB per instance), and a client for each.
func tenantCluster(t testing.TB, slots int) (*cluster.Cluster, *client.Client, *client.Client) {
	t.Helper()
	ts, err := auth.ParseTenants([]byte(`{"tenants":[
		{"name":"a","token_sha256":["` + auth.HashToken(isoTokenA) + `"]},
		{"name":"b","token_sha256":["` + auth.HashToken(isoTokenB) + `"],"quotas":{"call_timeout_ms":500,"memory_bytes":67108864}}]}`))
	if err != nil {
		t.Fatal(err)
	}
	c := clustertest.Start(t, cluster.Config{TaskManagers: 1, Slots: slots, JobManager: func(j *jm.Config) { j.Tenants = ts }})
	ca, err := c.Client(client.WithToken(isoTokenA))
	if err != nil {
		t.Fatal(err)
	}
	cb, err := c.Client(client.WithToken(isoTokenB))
	if err != nil {
		t.Fatal(err)
	}
	return c, ca, cb
}

// wordCounts is the word count of path as the example computes it (runs
// of ASCII letters, lower-cased), as sorted "word\tcount" lines.
func wordCounts(t testing.TB, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	n := map[string]int{}
	for _, w := range strings.FieldsFunc(string(b), func(r rune) bool { return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z') }) {
		n[strings.ToLower(w)]++
	}
	var out []string
	for w, k := range n {
		out = append(out, fmt.Sprintf("%s\t%d", w, k))
	}
	return clustertest.Lines(toBytes(out))
}

func toBytes(ss []string) [][]byte {
	out := make([][]byte, len(ss))
	for i, s := range ss {
		out[i] = []byte(s)
	}
	return out
}

// submitAs stages args' local inputs under tenant and submits wasm.
func submitAs(ctx context.Context, t testing.TB, c *cluster.Cluster, cl *client.Client, tenant string, wasm []byte, args []string, p int) string {
	t.Helper()
	inputs, err := cluster.StageInputs(ctx, c.Blob(), tenant, args)
	if err != nil {
		t.Fatal(err)
	}
	digest, err := cl.UploadModule(ctx, wasm)
	if err != nil {
		t.Fatal(err)
	}
	id, err := cl.SubmitJob(ctx, client.JobSpec{ModuleDigest: digest, Args: args, Parallelism: p, Config: cluster.InputsConfig(nil, inputs)})
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// TestRunawayTenantFailsOnlyItsOwnJob: tenant b's memory bomb and infinite
// loop fail b's jobs (on b's memory and call-deadline quotas) while tenant
// a's word count, on the same TaskManager, finishes with the right counts.
// The loop also proves a spinning guest cannot stop the world: the garbage
// collections a's job triggers complete while b's guest spins.
func TestRunawayTenantFailsOnlyItsOwnJob(t *testing.T) {
	c, ca, cb := tenantCluster(t, 4)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	hostile := clustertest.Guest(t, "internal/cluster/testdata/runaway")
	wc := clustertest.Guest(t, "examples/wordcount")
	input := "../../examples/wordcount/testdata/hamlet.txt"

	bomb := submitAs(ctx, t, c, cb, "b", hostile, []string{"bomb"}, 1)
	loop := submitAs(ctx, t, c, cb, "b", hostile, []string{"loop"}, 1)
	words := submitAs(ctx, t, c, ca, "a", wc, []string{"--input", input}, 2)

	r, err := ca.WaitJob(ctx, words)
	if err != nil {
		t.Fatal(err)
	}
	if r.State != client.StateFinished {
		t.Fatalf("a's word count ended %s: %s", r.State, r.Failure)
	}
	if d := clustertest.Diff(wordCounts(t, input), clustertest.Lines(r.Records)); d != "" {
		t.Fatalf("a's word count is wrong: %s", d)
	}
	// Under the race detector the bomb may reach b's 500ms call deadline
	// before its 64 MiB cap: either quota stops it.
	for id, want := range map[string]string{bomb: "memory|deadline", loop: "deadline"} {
		r, err := cb.WaitJob(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if r.State != client.StateFailed || !regexp.MustCompile(want).MatchString(strings.ToLower(r.Failure)) {
			t.Errorf("b's %s job ended %s: %q", want, r.State, r.Failure)
		}
		if _, err := ca.GetJob(ctx, id); err == nil {
			t.Errorf("a sees b's job %s", id)
		}
	}
	for _, tm := range c.TaskManagers() {
		if !tm.Registered() {
			t.Fatal("the TaskManager went away")
		}
	}
}
