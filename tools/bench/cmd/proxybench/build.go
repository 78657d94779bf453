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
	b.bin = filepath.Join(b.c.dir, "provlog")
	if b.c.provlog != "" {
		b.buildN = "given with -provlog (" + b.c.provlog + "), copied"
		return copyBinary(b.c.provlog, b.bin)
	}
	root, err := moduleRoot(ctx)
	if err != nil {
		return err
	}
	built := filepath.Join(b.c.dir, "provlog.built")
	args := []string{"build", "-o", built}
	b.buildN = "go build ./cmd/provlog in " + root + ", copied"
	args = append(args, "./cmd/provlog")
	b.logf("building provlog: go %s (in %s)", strings.Join(args, " "), root)
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("building provlog: %v\n%s", err, out)
	}
	return copyBinary(built, b.bin)
}

// copyBinary writes a copy of the executable src at dst, with plain
// writes, and leaves all of it in the page cache. The executable's
// resident pages (A4's file-backed part) depend on how the cache holds
// it, as the kernel maps the cached pages around each one a process
// touches: the same binary measured 31.0 MiB resident after A1 with part
// of it out of the cache and 34.3 MiB with all of it in (session 14), and
// `provlog serve` at idle held 27.2 MiB of the linker's output file
// against 22.7 MiB of a copy of it (session 23), which had made one build
// look 4 MiB larger than another. Every binary measured is such a copy.
func copyBinary(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o755)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
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
