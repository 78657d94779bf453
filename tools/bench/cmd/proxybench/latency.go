package main

// A1 (stdio) and A2 (HTTP): latency of one call, direct and proxied.

import (
	"context"
	"fmt"
	"path/filepath"
	"time"
)

type latencyResult struct {
	direct, proxied []time.Duration
	entries         int64 // log entries the proxied calls added (-1: not read)
}

// measureLatency warms both sessions up, then times -n calls on each, in
// alternating blocks so that changes in the machine's load hit both alike.
func (b *bench) measureLatency(ctx context.Context, direct, proxied target) (*latencyResult, error) {
	for _, t := range []target{direct, proxied} {
		for range b.c.warmup {
			if err := t.call(ctx); err != nil {
				return nil, fmt.Errorf("warm-up: %w", err)
			}
		}
	}
	r := &latencyResult{direct: make([]time.Duration, 0, b.c.n), proxied: make([]time.Duration, 0, b.c.n)}
	for len(r.proxied) < b.c.n {
		for i, t := range []target{direct, proxied} {
			out := &r.direct
			if i == 1 {
				out = &r.proxied
			}
			for j := 0; j < b.c.block && len(*out) < b.c.n; j++ {
				start := time.Now()
				if err := t.call(ctx); err != nil {
					return nil, err
				}
				*out = append(*out, time.Since(start))
			}
		}
	}
	return r, nil
}

func (b *bench) runStdio(ctx context.Context) error {
	b.logf("A1: stdio latency, %d samples per path (warm-up %d)", b.c.n, b.c.warmup)
	sc := b.c.stdioCommand()
	direct, err := b.newProc("everything-stdio-direct", nil, sc[0], sc[1:]...)
	if err != nil {
		return err
	}
	dcs, err := connectCommand(ctx, direct.cmd, b.c.protocol)
	if err != nil {
		return fmt.Errorf("connecting to everything-server (stdio): %w\n%s", err, direct.logTail())
	}
	defer dcs.Close()

	data := filepath.Join(b.c.dir, "data-stdio")
	cfg, err := b.writeConfig("provlog-stdio", data, b.c.configCommand())
	if err != nil {
		return err
	}
	pl, err := b.newProc("provlog-stdio", nil, b.bin, "serve", "--config", cfg)
	if err != nil {
		return err
	}
	pcs, err := connectCommand(ctx, pl.cmd, b.c.protocol)
	if err != nil {
		return fmt.Errorf("connecting to provlog serve (stdio): %w\n%s", err, pl.logTail())
	}
	defer pcs.Close()
	ptool := serverID + "__" + b.c.tool
	if err := checkTool(ctx, dcs, b.c.tool); err != nil {
		return err
	}
	if err := checkTool(ctx, pcs, ptool); err != nil {
		return fmt.Errorf("provlog (stdio): %w", err)
	}
	r, err := b.measureLatency(ctx, target{cs: dcs, tool: b.c.tool, args: b.c.args}, target{cs: pcs, tool: ptool, args: b.c.args, wantReceipt: true})
	if err != nil {
		return fmt.Errorf("%w\nprovlog stderr:\n%s", err, pl.logTail())
	}
	r.entries = -1
	b.res.stdio = r
	if b.res.rssStdio, err = vmHWM(pl.pid()); err != nil {
		return fmt.Errorf("reading provlog's VmHWM: %w", err)
	}
	b.collectProfile(pl)
	return nil
}
