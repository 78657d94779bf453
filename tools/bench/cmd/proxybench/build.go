package main

// Building the provlog binary under test.

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
)

func (b *bench) buildProvlog(ctx context.Context) error {
	if b.c.provlog != "" {
		abs, err := filepath.Abs(b.c.provlog)
		if err != nil {
			return err
		}
		b.bin, b.buildN = abs, "given with -provlog"
		return nil
	}
	root, err := moduleRoot(ctx)
	if err != nil {
		return err
	}
	b.bin = filepath.Join(b.c.dir, "provlog")
	args := []string{"build", "-o", b.bin}
	b.buildN = "go build ./cmd/provlog in " + root
	args = append(args, "./cmd/provlog")
	b.logf("building provlog: go %s (in %s)", strings.Join(args, " "), root)
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("building provlog: %v\n%s", err, out)
	}
	return nil
}

// moduleRoot finds the main module's directory: through the replace
// directive when run inside tools/bench, else relative to this file.
func moduleRoot(ctx context.Context) (string, error) {
	cmd := exec.CommandContext(ctx, "go", "list", "-m", "-f", "{{.Dir}}", "github.com/provlog/provlog")
	if out, err := cmd.Output(); err == nil {
		if d := strings.TrimSpace(string(out)); d != "" {
			return d, nil
		}
	}
	if _, file, _, ok := runtime.Caller(0); ok {
		d := filepath.Join(filepath.Dir(file), "..", "..", "..", "..")
		if _, err := os.Stat(filepath.Join(d, "cmd", "provlog", "main.go")); err == nil {
			return filepath.Clean(d), nil
		}
	}
	return "", errors.New("cannot find the provlog module: run inside tools/bench or pass -provlog")
}
