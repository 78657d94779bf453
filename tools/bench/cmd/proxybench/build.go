package main

// Building the provlog binary under test.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
)

// profileHook is added to package main of cmd/provlog through go build
// -overlay when -cpuprofile-dir is set: provlog has no profiling flag, and
// the tree must not change. With PROXYBENCH_CPUPROFILE=F it profiles from
// start until SIGUSR1, then writes F (via F.tmp, so a reader never sees a
// partial file), after a heap profile (inuse after a GC) in F.heap.
const profileHook = `package main

import (
	"os"
	"runtime"
	"runtime/pprof"
)

func init() {
	path := os.Getenv("PROXYBENCH_CPUPROFILE")
	if path == "" {
		return
	}
	f, err := os.Create(path + ".tmp")
	if err != nil {
		return
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return
	}
	c := make(chan os.Signal, 1)
	signal.Notify(c, syscall.SIGUSR1)
	go func() {
		<-c
		pprof.StopCPUProfile()
		f.Close()
		if h, err := os.Create(path + ".heap"); err == nil {
			runtime.GC()
			pprof.WriteHeapProfile(h)
			h.Close()
		}
		os.Rename(path+".tmp", path)
	}()
}
`

const hookName = "zz_proxybench_profile.go"

func (b *bench) buildProvlog(ctx context.Context) error {
	if b.c.provlog != "" {
		if b.c.profDir != "" {
			return errors.New("-cpuprofile-dir needs provlog built by proxybench (drop -provlog)")
		}
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
	if b.c.profDir != "" {
		hook := filepath.Join(b.c.dir, hookName)
		if err := os.WriteFile(hook, []byte(profileHook), 0o644); err != nil {
			return err
		}
		ov, _ := json.Marshal(map[string]any{"Replace": map[string]string{filepath.Join(root, "cmd", "provlog", hookName): hook}})
		ovPath := filepath.Join(b.c.dir, "overlay.json")
		if err := os.WriteFile(ovPath, ov, 0o644); err != nil {
			return err
		}
		args = append(args, "-overlay", ovPath)
		b.buildN += " with a CPU-profiling hook (-overlay)"
	}
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
