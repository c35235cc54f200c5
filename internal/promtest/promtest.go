package promtest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/testutil"
)

// RequireEnv, set to 1, makes a missing or broken Prometheus fail the
// tests that need it instead of skipping them.
const RequireEnv = "SLUICE_REQUIRE_PROMETHEUS"

// DebianPackages provide the server binary.
const DebianPackages = "prometheus"

// Binary returns the path of the prometheus server.
//
// # Errors
//
// No prometheus on PATH.
func Binary() (string, error) {
	p, err := exec.LookPath("prometheus")
	if err != nil {
		return "", fmt.Errorf("no prometheus server on PATH: install Debian's package (apt-get install %s): %w", DebianPackages, err)
	}
	return p, nil
}

// Works checks that the server binary runs.
//
// # Errors
//
// No binary, or one that does not run.
func Works(ctx context.Context) error {
	bin, err := Binary()
	if err != nil {
		return err
	}
	if out, err := exec.CommandContext(ctx, bin, "--version").CombinedOutput(); err != nil {
		return fmt.Errorf("%s --version: %w: %s", bin, err, out)
	}
	return nil
}

// Server is a Prometheus server a test started.
type Server struct {
	URL string // http://127.0.0.1:PORT
}

// Start runs Prometheus scraping targets (host:port, at /metrics) every
// interval, and stops it when the test ends. It returns once the server is
// ready. Without a binary it skips the test, or fails it under RequireEnv.
func Start(t testing.TB, interval time.Duration, targets ...string) *Server {
	t.Helper()
	if err := Works(context.Background()); err != nil {
		if os.Getenv(RequireEnv) == "1" {
			t.Fatalf("%s=1 but: %v", RequireEnv, err)
		}
		t.Skipf("skipping: %v", err)
	}
	bin, _ := Binary()
	dir := t.TempDir()
	quoted := make([]string, len(targets))
	for i, tg := range targets {
		quoted[i] = strconv.Quote(tg)
	}
	conf := fmt.Sprintf(`global:
  scrape_interval: %s
  scrape_timeout: %s
scrape_configs:
  - job_name: sluice
    static_configs:
      - targets: [%s]
`, interval, interval, strings.Join(quoted, ", "))
	confPath := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(confPath, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	addr := freeAddr(t)
	logf, err := os.Create(filepath.Join(dir, "prometheus.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "--config.file="+confPath, "--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+addr, "--log.level=warn")
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatalf("start prometheus: %v", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
		logf.Close()
		if t.Failed() {
			if b, err := os.ReadFile(logf.Name()); err == nil {
				t.Logf("prometheus log:\n%s", b)
			}
		}
	})
	s := &Server{URL: "http://" + addr}
	testutil.CheckFor(t, 30*time.Second, 50*time.Millisecond, func() error {
		select {
		case err := <-exited:
			exited <- err
			b, _ := os.ReadFile(logf.Name())
			t.Fatalf("prometheus exited: %v\n%s", err, b)
		default:
		}
		resp, err := http.Get(s.URL + "/-/ready")
		if err != nil {
			return fmt.Errorf("prometheus not ready: %w", err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("prometheus not ready: %s", resp.Status)
		}
		return nil
	})
	return s
}

// freeAddr is a loopback address with a port free a moment ago.
func freeAddr(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// Sample is one series of an instant query's answer.
type Sample struct {
	Labels map[string]string
	Value  float64
}

// Query runs an instant PromQL query (the HTTP API's /api/v1/query).
//
// # Errors
//
// The server cannot be reached, or refuses the query, or answers
// something other than a vector.
func (s *Server) Query(ctx context.Context, q string) ([]Sample, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.URL+"/api/v1/query?query="+url.QueryEscape(q), nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("query %s: %w", q, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("query %s: %w", q, err)
	}
	var r struct {
		Status string `json:"status"`
		Error  string `json:"error"`
		Data   struct {
			ResultType string `json:"resultType"`
			Result     []struct {
				Metric map[string]string `json:"metric"`
				Value  [2]any            `json:"value"`
			} `json:"result"`
		} `json:"data"`
	}
	if err := json.Unmarshal(body, &r); err != nil {
		return nil, fmt.Errorf("query %s: %s: %w", q, body, err)
	}
	if r.Status != "success" {
		return nil, fmt.Errorf("query %s: %s", q, r.Error)
	}
	if r.Data.ResultType != "vector" {
		return nil, fmt.Errorf("query %s: a %s, want a vector", q, r.Data.ResultType)
	}
	out := make([]Sample, 0, len(r.Data.Result))
	for _, res := range r.Data.Result {
		str, ok := res.Value[1].(string)
		if !ok {
			return nil, errors.New("query " + q + ": a sample without a value")
		}
		v, err := strconv.ParseFloat(str, 64)
		if err != nil {
			return nil, fmt.Errorf("query %s: value %q: %w", q, str, err)
		}
		out = append(out, Sample{Labels: res.Metric, Value: v})
	}
	return out, nil
}

// Value runs q, which must answer one series, and returns its value.
//
// # Errors
//
// As Query, or an answer of no series or several.
func (s *Server) Value(ctx context.Context, q string) (float64, error) {
	ss, err := s.Query(ctx, q)
	if err != nil {
		return 0, err
	}
	if len(ss) != 1 {
		return 0, fmt.Errorf("query %s: %d series, want 1: %+v", q, len(ss), ss)
	}
	return ss[0].Value, nil
}
