package main

// Building the provlog binary under test.

import (
	"context"
	"errors"
	"fmt"
	"io"
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
		return cacheWhole(b.bin)
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
	return cacheWhole(b.bin)
}

// cacheWhole reads the file at path once, so that all of it is in the
// page cache when provlog starts. The executable's resident pages (A4's
// file-backed part) depend on what the cache holds, as the kernel maps
// the cached pages around each one a process touches: the same binary
// measured 31.0 MiB resident after A1 with part of it out of the cache
// and 34.3 MiB with all of it in (session 14), which had made one build
// look 4 MiB larger than another.
func cacheWhole(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = io.Copy(io.Discard, f)
	return err
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
