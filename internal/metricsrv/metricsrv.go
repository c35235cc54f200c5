package metricsrv

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Path is where the metrics are served.
const Path = "/metrics"

// Server serves one registry's metrics over HTTP until Close.
type Server struct {
	ln   net.Listener
	srv  *http.Server
	done chan struct{}
}

// NewRegistry returns a registry with the process's Go runtime and process
// collectors, for a JobManager or TaskManager to add its own to.
func NewRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(prometheus.NewGoCollector(), prometheus.NewProcessCollector(prometheus.ProcessCollectorOpts{}))
	return reg
}

// Listen binds addr (host:port; port 0 picks one) and serves g at Path.
// A collector that fails does not fail the scrape: the others are served
// and the error is logged.
//
// # Errors
//
// An address that cannot be bound.
func Listen(addr string, g prometheus.Gatherer, log *slog.Logger) (*Server, error) {
	if log == nil {
		log = slog.Default()
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("metrics listen %s: %w", addr, err)
	}
	mux := http.NewServeMux()
	mux.Handle("GET "+Path, promhttp.HandlerFor(g, promhttp.HandlerOpts{
		ErrorHandling: promhttp.ContinueOnError,
		ErrorLog:      slogAdapter{log},
		Timeout:       10 * time.Second,
	}))
	s := &Server{ln: ln, done: make(chan struct{}), srv: &http.Server{
		Handler:           mux,
		ReadHeaderTimeout: 10 * time.Second,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelDebug),
	}}
	go func() {
		defer close(s.done)
		if err := s.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Warn("metrics server stopped", "err", err)
		}
	}()
	return s, nil
}

// Addr returns the bound address, host:port.
func (s *Server) Addr() string { return s.ln.Addr().String() }

// Close stops serving, waiting up to 5s for scrapes in progress.
//
// # Errors
//
// The scrapes in progress did not end in time.
func (s *Server) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := s.srv.Shutdown(ctx)
	<-s.done
	if err != nil {
		return fmt.Errorf("close metrics server: %w", err)
	}
	return nil
}

// slogAdapter is promhttp's error log.
type slogAdapter struct{ log *slog.Logger }

func (a slogAdapter) Println(v ...any) { a.log.Warn("metrics scrape: " + fmt.Sprint(v...)) }
