package exporter

import (
	"context"
	"errors"
	"fmt"
	"html"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// DefaultListen is where the exporter serves unless told otherwise: the
// loopback interface only (a remote Prometheus needs --listen), on a port
// of its own.
const DefaultListen = "127.0.0.1:9750"

// Handler serves /metrics from the exporter's last collections, the
// profiled targets' last profiles at /debug/pprof/{heap,allocs} and a
// small page at /. Nothing in a request reaches a target: the one
// parameter read, a profile's pid, picks among the bytes already built.
func (e *Exporter) Handler() http.Handler {
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(e.Collector())
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{
		ErrorHandling: promhttp.ContinueOnError,
		// A scrape only reads memory; the bound is against a client that
		// opens connections without end.
		MaxRequestsInFlight: 200,
		Timeout:             10 * time.Second,
	}))
	// The profiles are bytes the samplers' goroutines left: a request
	// copies them out; the bound is, as for /metrics, against a client
	// that opens connections without end.
	pprof := http.MaxBytesHandler(limitInFlight(200, http.HandlerFunc(e.servePprof)), 0)
	mux.Handle("GET /debug/pprof/{name}", pprof)
	mux.Handle("GET /pid/{pid}/debug/pprof/{name}", pprof)
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprintf(w, `<!doctype html>
<html><head><title>arenactl exporter</title></head><body>
<h1>arenactl exporter</h1>
<p>glibc malloc metrics of the processes this exporter was started to watch,
read-only, at most every %s per process. <a href="metrics">Metrics</a>.
Processes chosen for it (--profile-pid, --profile-comm) have what they hold by
allocation stack at /debug/pprof/heap?pid=N, as pprof.</p>
</body></html>
`, html.EscapeString(e.cfg.MinInterval.String()))
	})
	return mux
}

// limitInFlight answers 503 beyond n requests at once.
func limitInFlight(n int, h http.Handler) http.Handler {
	sem := make(chan struct{}, n)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case sem <- struct{}{}:
			defer func() { <-sem }()
			h.ServeHTTP(w, r)
		default:
			http.Error(w, "too many requests at once", http.StatusServiceUnavailable)
		}
	})
}

// Serve serves Handler on l until ctx ends.
func (e *Exporter) Serve(ctx context.Context, l net.Listener) error {
	srv := &http.Server{
		Handler:           e.Handler(),
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       10 * time.Second,
		WriteTimeout:      30 * time.Second,
		IdleTimeout:       60 * time.Second,
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		srv.Shutdown(sctx)
	}()
	err := srv.Serve(l)
	<-done
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}
