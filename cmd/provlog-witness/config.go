package main

import (
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/mod/sumdb/note"

	"github.com/provlog/provlog/cmd/internal/cli"
	"github.com/provlog/provlog/witness/server"
)

// Config is the YAML configuration of provlog-witness serve:
//
//	key: witness.key            # private key file from keygen
//	data: witness-data          # state: Pebble database (db/) and fork evidence (evidence/)
//	logs:                       # the logs the witness cosigns for
//	  - origin: provlog.example/agent-7
//	    vkeys:                  # keys trusted to sign its checkpoints
//	      - provlog.example/agent-7+8e1f0a2b+AQ...
//
// Relative paths are relative to the config file's directory.
type Config struct {
	Key  string      `yaml:"key"`
	Data string      `yaml:"data"`
	Logs []LogConfig `yaml:"logs"`
}

// LogConfig is one log the witness cosigns for.
type LogConfig struct {
	Origin string   `yaml:"origin"`
	VKeys  []string `yaml:"vkeys"`
}

// loadConfig reads and checks a config file, resolving its paths.
func loadConfig(path string) (*Config, []server.Log, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, fmt.Errorf("reading config: %w", err)
	}
	cfg := &Config{}
	if err := cli.DecodeYAML(b, cfg); err != nil {
		return nil, nil, fmt.Errorf("config %s: %w", path, err)
	}
	if cfg.Key == "" {
		return nil, nil, fmt.Errorf("config %s: key: the witness key file is required (make one with provlog-witness keygen)", path)
	}
	if cfg.Data == "" {
		return nil, nil, fmt.Errorf("config %s: data: the state directory is required", path)
	}
	dir := filepath.Dir(path)
	for _, p := range []*string{&cfg.Key, &cfg.Data} {
		if !filepath.IsAbs(*p) {
			*p = filepath.Join(dir, *p)
		}
	}
	if len(cfg.Logs) == 0 {
		return nil, nil, fmt.Errorf("config %s: logs: no log configured", path)
	}
	var logs []server.Log
	for i, l := range cfg.Logs {
		if l.Origin == "" {
			return nil, nil, fmt.Errorf("config %s: logs[%d]: origin is required", path, i)
		}
		if len(l.VKeys) == 0 {
			return nil, nil, fmt.Errorf("config %s: log %q: vkeys: at least one verifier key is required", path, l.Origin)
		}
		sl := server.Log{Origin: l.Origin}
		for _, k := range l.VKeys {
			v, err := note.NewVerifier(k)
			if err != nil {
				return nil, nil, fmt.Errorf("config %s: log %q: vkey %q: %w", path, l.Origin, k, err)
			}
			if v.Name() != l.Origin {
				return nil, nil, fmt.Errorf("config %s: log %q: vkey %q is named %q; a log's key is named after its origin", path, l.Origin, k, v.Name())
			}
			sl.Verifiers = append(sl.Verifiers, v)
		}
		logs = append(logs, sl)
	}
	if err := server.CheckLogs(logs); err != nil {
		return nil, nil, fmt.Errorf("config %s: %w", path, err)
	}
	return cfg, logs, nil
}
