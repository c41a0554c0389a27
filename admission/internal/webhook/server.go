package webhook

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"
)

// shutdownTimeout bounds finishing in-flight reviews at shutdown.
const shutdownTimeout = 5 * time.Second

// Server is the webhook's HTTPS server. Plain HTTP is refused: the listener speaks only TLS.
type Server struct {
	srv *http.Server
	ln  net.Listener
}

// Listen binds addr and returns a Server that answers at Path with h over TLS from cfg.
func Listen(addr string, cfg *tls.Config, h http.Handler) (*Server, error) {
	if cfg == nil || cfg.MinVersion < tls.VersionTLS12 {
		return nil, errors.New("listen webhook: a TLS configuration with MinVersion TLS 1.2 or newer is required")
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listen webhook on %s: %w", addr, err)
	}
	mux := http.NewServeMux()
	mux.Handle(Path, h)
	return &Server{ln: ln, srv: &http.Server{
		Handler:           mux,
		TLSConfig:         cfg,
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       15 * time.Second,
		WriteTimeout:      15 * time.Second,
		IdleTimeout:       90 * time.Second,
		MaxHeaderBytes:    64 << 10,
	}}, nil
}

// Addr is the bound address (useful with port 0).
func (s *Server) Addr() string { return s.ln.Addr().String() }

// Run serves until ctx ends, then finishes in-flight reviews within a few seconds. It returns
// nil on a clean stop.
func (s *Server) Run(ctx context.Context) error {
	errc := make(chan error, 1)
	go func() { errc <- s.srv.ServeTLS(s.ln, "", "") }()
	select {
	case err := <-errc:
		return fmt.Errorf("serve webhook: %w", err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), shutdownTimeout)
	defer cancel()
	shutdownErr := s.srv.Shutdown(sctx)
	if err := <-errc; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("serve webhook: %w", err)
	}
	if shutdownErr != nil {
		return fmt.Errorf("shut down webhook: %w", shutdownErr)
	}
	return nil
}
