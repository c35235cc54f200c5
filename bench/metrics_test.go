package bench

import (
	"context"
	"io"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"github.com/sluicehq/sluice/local"
	"github.com/sluicehq/sluice/local/localtest"
	"github.com/sluicehq/sluice/sdk/client"
)

// metricsInputSize makes one word count at p=2 run for a few seconds, so
// heartbeats (with task figures) and scrapes happen during it.
const metricsInputSize = 8 << 20

// BenchmarkMetricsWordCount runs the word count at parallelism 2 on two
// embedded clusters in the same process, one measuring its tasks and
// serving /metrics (the JobManager's and the TaskManager's, scraped every
// second by a goroutine, as a Prometheus with a short interval would), one
// with the task metrics off and no endpoint, alternating which goes first;
// only one job runs at a time. x_metrics is the throughput with metrics as
// a fraction of the throughput without (target ≥ 0.97: at most 3% lost),
// over all iterations and as the median of the iterations' ratios;
// x_metrics_cpu the same with the process's CPU time per job, which
// other work on the machine disturbs less.
func BenchmarkMetricsWordCount(b *testing.B) {
	wasm := localtest.Guest(b, "examples/wordcount")
	in := filepath.Join(b.TempDir(), "input.txt")
	if err := localtest.GenerateText(in, metricsInputSize, 5); err != nil {
		b.Fatal(err)
	}
	args := []string{"--input", in}
	on := localtest.Start(b, local.Config{TaskManagers: 1, Slots: 2, MetricsHost: "127.0.0.1"})
	off := localtest.Start(b, local.Config{TaskManagers: 1, Slots: 2, DisableMetrics: true})
	onCl, offCl := on.Client(), off.Client()
	onSpec, offSpec := jobSpec(b, on, onCl, wasm, args, nil), jobSpec(b, off, offCl, wasm, args, nil)
	runJob(b, onCl, onSpec) // warm-up: compile the module (one runtime cache serves both)
	runJob(b, offCl, offSpec)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	scrapes := make(chan int)
	go func() {
		n := 0
		defer func() { scrapes <- n }()
		t := time.NewTicker(time.Second)
		defer t.Stop()
		targets := []string{on.JobManager().MetricsAddr(), on.TaskManagers()[0].MetricsAddr()}
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			for _, a := range targets {
				if resp, err := http.Get("http://" + a + "/metrics"); err == nil {
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					n++
				}
			}
		}
	}()

	timed := func(cl *client.Client, spec client.JobSpec) cost {
		c0 := processCPU(b)
		t0 := time.Now()
		runJob(b, cl, spec)
		return cost{wall: time.Since(t0), cpu: processCPU(b) - c0}
	}
	var withM, without cost
	var ratios, cpuRatios []float64
	b.SetBytes(metricsInputSize)
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		var a, z cost
		if i%2 == 0 {
			z = timed(offCl, offSpec)
			a = timed(onCl, onSpec)
		} else {
			a = timed(onCl, onSpec)
			z = timed(offCl, offSpec)
		}
		withM, without = withM.add(a), without.add(z)
		ratios = append(ratios, float64(z.wall)/float64(a.wall))
		cpuRatios = append(cpuRatios, float64(z.cpu)/float64(a.cpu))
	}
	b.StopTimer()
	cancel()
	n := <-scrapes
	if n == 0 {
		b.Fatal("no scrape succeeded: the comparison would mean nothing")
	}
	b.ReportMetric(float64(without.wall)/float64(withM.wall), "x_metrics")
	b.ReportMetric(median(ratios), "x_metrics_median")
	b.ReportMetric(float64(without.cpu)/float64(withM.cpu), "x_metrics_cpu")
	b.ReportMetric(median(cpuRatios), "x_metrics_cpu_median")
	b.ReportMetric(float64(n)/float64(b.N), "scrapes/run")
}

// cost is what one job took: wall time, and the CPU time of the whole
// process (both clusters; only one runs a job at a time), which other
// processes' load on the machine moves far less than wall time.
type cost struct{ wall, cpu time.Duration }

func (c cost) add(o cost) cost { return cost{c.wall + o.wall, c.cpu + o.cpu} }
