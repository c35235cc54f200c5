package local_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/promtest"
	"github.com/sluicehq/sluice/internal/testutil"
	"github.com/sluicehq/sluice/local"
	"github.com/sluicehq/sluice/local/localtest"
)

// TestPrometheusScrapesTheWordCount runs the word count on two TaskManagers
// that serve /metrics, with a real Prometheus server scraping them and the
// JobManager, and asks Prometheus for what the input says the job must
// have counted: lines out of the text source, words into the count,
// distinct words out of the job. A task's final figures are kept for the
// scrapes right after it ended, so the answer does not depend on a scrape
// landing while the job runs; last_over_time reads them after the series
// went stale.
func TestPrometheusScrapesTheWordCount(t *testing.T) {
	const lines = 3000
	words, distinct := 0, map[string]bool{}
	var b strings.Builder
	for i := range lines {
		ws := []string{"alpha", "beta", fmt.Sprintf("w%c%c", 'a'+i%26, 'a'+i/26%26)}[:1+i%3]
		for _, w := range ws {
			distinct[w] = true
		}
		words += len(ws)
		b.WriteString(strings.Join(ws, " ") + "\n")
	}
	in := filepath.Join(t.TempDir(), "input.txt")
	if err := os.WriteFile(in, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	c := localtest.Start(t, local.Config{TaskManagers: 2, Slots: 2, MetricsHost: "127.0.0.1"})
	targets := []string{c.JobManager().MetricsAddr()}
	for _, tm := range c.TaskManagers() {
		targets = append(targets, tm.MetricsAddr())
	}
	prom := promtest.Start(t, 200*time.Millisecond, targets...)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	wasm := localtest.Guest(t, "local/testdata/slowwc")
	id := localtest.SubmitJob(t, c, wasm, []string{"--input", in, "--spin", "200"}, 2)
	r := localtest.WaitFinished(t, c, id)
	if len(r.Records) != len(distinct) {
		t.Fatalf("the job counted %d distinct words, want %d", len(r.Records), len(distinct))
	}

	sel := func(metric, labels string) string {
		return fmt.Sprintf(`sum(last_over_time(%s{job_id=%q,%s}[10m]))`, metric, id, labels)
	}
	for _, q := range []struct {
		what, query string
		want        float64
	}{
		{"lines out of the text source", sel("sluice_operator_records_out_total", `operator="lines"`), lines},
		{"words into the count", sel("sluice_operator_records_in_total", `operator="count"`), float64(words)},
		{"distinct words out of the job", sel("sluice_task_records_out_total", `task="count -> format -> out"`), float64(len(distinct))},
		{"subtasks with a job name", fmt.Sprintf(`count(last_over_time(sluice_task_records_in_total{job_id=%q,job_name!=""}[10m]))`, id), 4},
		{"guests that used no fuel", fmt.Sprintf(`count(last_over_time(sluice_task_guest_fuel_total{job_id=%q}[10m]) == 0) or vector(0)`, id), 0},
		{"finished jobs on the JobManager", `sluice_jobs{state="FINISHED",tenant="default"}`, 1},
		{"slots the JobManager counts", `sluice_slots_total`, 4},
		{"slots the TaskManagers count", `sum(sluice_taskmanager_slots_total)`, 4},
		{"targets up", `sum(up)`, float64(len(targets))},
	} {
		testutil.CheckFor(t, time.Minute, 100*time.Millisecond, func() error {
			got, err := prom.Value(ctx, q.query)
			if err != nil {
				return err
			}
			if got != q.want {
				return fmt.Errorf("%s: %s = %v, want %v", q.what, q.query, got, q.want)
			}
			return nil
		})
	}

	// The ended tasks' series leave the TaskManagers' endpoints.
	for _, tm := range c.TaskManagers() {
		testutil.CheckFor(t, 30*time.Second, 100*time.Millisecond, func() error {
			body, err := scrape(ctx, tm.MetricsAddr())
			if err != nil {
				return err
			}
			if strings.Contains(body, id) {
				return fmt.Errorf("task manager %s still exports series of ended job %s", tm.ResourceID(), id)
			}
			return nil
		})
	}
}

// scrape returns the text of a /metrics endpoint.
func scrape(ctx context.Context, addr string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/metrics", nil)
	if err != nil {
		return "", err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("GET %s/metrics: %s: %s", addr, resp.Status, b)
	}
	return string(b), err
}
