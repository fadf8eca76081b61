package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/sweeprail/sweeprail/internal/config"
	"github.com/sweeprail/sweeprail/internal/history"
	"github.com/sweeprail/sweeprail/internal/policy"
	"github.com/sweeprail/sweeprail/internal/redact"
	"github.com/sweeprail/sweeprail/internal/status"
)

// The status listener's bounds: a page view reads the history for at most five seconds.
const (
	statusConns        = 2
	statusWriteTimeout = 15 * time.Second
	statusGrace        = 5 * time.Second
)

// statusServer is the status page's listener, server and pool (STATUS_ADDR). Its pool is its
// own, of statusConns connections, so no number of page views takes a connection from a
// sweep; nil when STATUS_ADDR is unset, and every method is then a no-op.
type statusServer struct {
	srv  *http.Server
	ln   net.Listener
	pool *pgxpool.Pool
}

// listenStatus opens the status page's listener and pool when cfg.StatusAddr is set.
func listenStatus(ctx context.Context, cfg config.API, poolCfg *pgxpool.Config, specs []policy.Spec, red *redact.Redactor,
	logger *slog.Logger) (*statusServer, error) {
	if cfg.StatusAddr == "" {
		return nil, nil
	}
	if host, _, _ := net.SplitHostPort(cfg.StatusAddr); !isLoopback(host) {
		logger.Warn("STATUS_ADDR is not a loopback address: the status page has no authentication; "+
			"serve it on 127.0.0.1 and reach it by a port-forward", "addr", cfg.StatusAddr)
	}
	pc := poolCfg.Copy()
	pc.MaxConns, pc.MinConns, pc.MinIdleConns = statusConns, 0, 0
	pool, err := pgxpool.NewWithConfig(ctx, pc)
	if err != nil {
		return nil, fmt.Errorf("open the status page's database pool: %w", err)
	}
	ln, err := net.Listen("tcp", cfg.StatusAddr)
	if err != nil {
		pool.Close()
		return nil, fmt.Errorf("listen on STATUS_ADDR=%s: %w", cfg.StatusAddr, err)
	}
	handler := status.NewHandler(status.Deps{
		Specs:    specs,
		History:  history.New(pool, time.Duration(cfg.RunHistoryRetention)),
		Redactor: red,
		Logger:   logger,

		ExpectedInterval: cfg.ExpectedInterval,
	})
	srv := &http.Server{
		Handler:           handler,
		ReadHeaderTimeout: readHeaderTimeout,
		ReadTimeout:       readHeaderTimeout,
		WriteTimeout:      statusWriteTimeout,
		IdleTimeout:       idleTimeout,
		MaxHeaderBytes:    maxHeaderBytes,
		ErrorLog:          slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
	}
	return &statusServer{srv: srv, ln: ln, pool: pool}, nil
}

// isLoopback reports whether host (of host:port) names only this machine.
func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// announce prints the page's address, for STATUS_ADDR=…:0: a test or a script reads it.
func (s *statusServer) announce(stdout io.Writer, logger *slog.Logger) {
	if s == nil {
		return
	}
	logger.Info("status page", "addr", s.ln.Addr().String(), "route", status.Route)
	fmt.Fprintf(stdout, "status page on http://%s%s\n", s.ln.Addr(), status.Route)
}

// serve serves the page until shutdown. A listener that fails is logged: the page is for
// operators, and its failure must not stop the sweeps.
func (s *statusServer) serve(logger *slog.Logger) {
	if s == nil {
		return
	}
	go func() {
		if err := s.srv.Serve(s.ln); !errors.Is(err, http.ErrServerClosed) {
			logger.Error("status page: serve", "err", err)
		}
	}()
}

// close stops the listener, lets page views in flight finish within statusGrace, and closes
// the pool.
func (s *statusServer) close() {
	if s == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), statusGrace)
	defer cancel()
	if err := s.srv.Shutdown(ctx); err != nil {
		_ = s.srv.Close()
	}
	_ = s.ln.Close() // when serve never started
	s.pool.Close()
}
