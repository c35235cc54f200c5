package metricsrv

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

func TestServesTheRegistryAtMetrics(t *testing.T) {
	reg := NewRegistry()
	g := prometheus.NewGauge(prometheus.GaugeOpts{Name: "sluice_test_gauge", Help: "a test gauge"})
	g.Set(42)
	reg.MustRegister(g)
	s, err := Listen("127.0.0.1:0", reg, nil)
	if err != nil {
		t.Fatal(err)
	}
	get := func(method, path string) (int, string) {
		req, err := http.NewRequest(method, "http://"+s.Addr()+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	code, body := get(http.MethodGet, Path)
	if code != http.StatusOK || !strings.Contains(body, "sluice_test_gauge 42") || !strings.Contains(body, "go_goroutines") {
		t.Fatalf("GET %s: %d\n%s", Path, code, body)
	}
	if code, _ := get(http.MethodPost, Path); code != http.StatusMethodNotAllowed {
		t.Errorf("POST %s: %d, want 405", Path, code)
	}
	if code, _ := get(http.MethodGet, "/other"); code != http.StatusNotFound {
		t.Errorf("GET /other: %d, want 404", code)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := http.Get("http://" + s.Addr() + Path); err == nil {
		t.Error("still serving after Close")
	}
	if _, err := Listen("256.0.0.1:0", reg, nil); err == nil {
		t.Error("listening on a bad address")
	}
}
