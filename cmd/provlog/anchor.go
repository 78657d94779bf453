package main

// provlog anchor: anchor the latest checkpoint now, the sidecar stopped.

import (
	"context"
	"io"
)

func runAnchor(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("anchor", stderr)
	cfgPath := fs.String("config", "", "YAML config with an anchors: section")
	data := fs.String("data", "", "data dir (overrides the config's data)")
	if err := parseFlags(fs, args, 0); err != nil {
		return err
	}
	if *cfgPath == "" {
		return usageErr("--config is required")
	}
	cfg, err := loadConfig(*cfgPath)
	if err != nil {
		return err
	}
	if *data != "" {
		cfg.Data = *data
	}
	return anchorNow(ctx, cfg.Data, cfg.Store, cfg.Anchors, cfg.dir, stdout)
}
