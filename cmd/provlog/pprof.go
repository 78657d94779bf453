package main

// serve --pprof ADDR: Go's profiling endpoints (net/http/pprof) on a
// loopback address of their own, for speed work on a running sidecar
// (tools/bench's proxybench -cpuprofile-dir uses it). Off by default.

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"time"
)

// listenPprof takes the --pprof address. It must be loopback: profiles
// show the process's stacks, command line and memory use, which are no
// one else's business, and the endpoints take no token.
func listenPprof(addr string) (net.Listener, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, usageErr("--pprof %q: %v", addr, err)
	}
	if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return nil, usageErr("--pprof %q: the profiling endpoints serve loopback only (127.0.0.1:PORT, [::1]:PORT, localhost:PORT)", addr)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("cannot serve profiles on %s: %w", addr, err)
	}
	if a, ok := ln.Addr().(*net.TCPAddr); !ok || !a.IP.IsLoopback() {
		ln.Close()
		return nil, fmt.Errorf("--pprof %q: %s is not a loopback address", addr, ln.Addr())
	}
	return ln, nil
}

// pprofHandler serves /debug/pprof/ from its own mux. (Importing
// net/http/pprof also registers it on http.DefaultServeMux; nothing in
// provlog serves that mux.)
func pprofHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	return mux
}

// servePprof serves the profiling endpoints on ln until ctx ends. A CPU
// profile or trace runs as long as its ?seconds= asks, so there is no
// write timeout; Close on the way out ends those under way.
func servePprof(ctx context.Context, ln net.Listener, logger *slog.Logger) {
	srv := &http.Server{Handler: pprofHandler(), ReadHeaderTimeout: 10 * time.Second}
	logger.Info("provlog serving profiles", "pprof", "http://"+ln.Addr().String()+"/debug/pprof/")
	go func() {
		<-ctx.Done()
		srv.Close()
	}()
	if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		logger.Error("profiling endpoints stopped", "err", err)
	}
}
