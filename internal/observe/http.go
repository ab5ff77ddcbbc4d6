package observe

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Ready says whether the broker is ready to serve: ok, or the reason it is not.
type Ready func() (ok bool, reason string)

// Server is the http.listener: /metrics, /healthz and /readyz.
type Server struct {
	ln  net.Listener
	srv *http.Server
	mux *http.ServeMux
	log *slog.Logger
}

// Listen binds addr (host:port; port 0 picks one) and serves m's registry and the health
// endpoints on it until Close. ready answers /readyz.
func Listen(addr string, m *Metrics, ready Ready, log *slog.Logger) (*Server, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(m.Registry, promhttp.HandlerOpts{ErrorLog: errorLog{log}}))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = w.Write([]byte("ok\n")) // a client gone before the answer is not our error
	})
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		ok, reason := ready()
		if !ok {
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = w.Write([]byte(reason + "\n"))
			return
		}
		_, _ = w.Write([]byte("ok\n"))
	})
	s := &Server{ln: ln, log: log, mux: mux, srv: &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}}
	go func() {
		if err := s.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("http.listener stopped", "err", err)
		}
	}()
	return s, nil
}

// Mount serves h under the path prefix (ending in "/") beside /metrics and the health
// endpoints, and redirects "/" there; it may be called while serving (the broker mounts the
// web console once its client listeners are bound).
func (s *Server) Mount(prefix string, h http.Handler) {
	s.mux.Handle(prefix, h)
	s.mux.Handle("GET /{$}", http.RedirectHandler(prefix, http.StatusFound))
}

// Addr is the bound address.
func (s *Server) Addr() net.Addr { return s.ln.Addr() }

// Close stops serving, waiting at most a few seconds for scrapes in progress.
func (s *Server) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return s.srv.Shutdown(ctx)
}

// errorLog logs promhttp's errors (a collector that failed) through slog.
type errorLog struct{ log *slog.Logger }

func (e errorLog) Println(v ...any) { e.log.Error("serving /metrics", "err", v) }
