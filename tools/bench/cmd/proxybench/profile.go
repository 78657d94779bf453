package main

// -cpuprofile-dir: the CPU and heap profiles of every provlog process,
// read from its profiling endpoints (provlog serve --pprof ADDR, on a
// loopback address proxybench picks).

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"sync"
	"time"

	"github.com/google/pprof/profile"
)

// A profiler reads one provlog process's CPU profile from its --pprof
// endpoint a second at a time, from the moment the process answers until
// collect, and writes them merged as one profile: the whole life of the
// process, as a profile started in main and stopped at the end would
// show it, but with no change to provlog beyond its switch.
type profiler struct {
	base string // http://ADDR/debug/pprof
	path string
	logf func(string, ...any)
	quit chan struct{}
	done chan struct{}
	once sync.Once
	cpu  []*profile.Profile // written by run until done
}

// pprofClient waits long enough for a CPU profile of one second.
var pprofClient = &http.Client{Timeout: 15 * time.Second}

func startProfiler(addr, path string, logf func(string, ...any)) *profiler {
	os.Remove(path)
	os.Remove(path + ".heap")
	p := &profiler{base: "http://" + addr + "/debug/pprof", path: path, logf: logf,
		quit: make(chan struct{}), done: make(chan struct{})}
	go p.run()
	return p
}

func (p *profiler) run() {
	defer close(p.done)
	for {
		select {
		case <-p.quit:
			return
		default:
		}
		b, err := fetch(p.base + "/profile?seconds=1")
		if err != nil {
			// Not up yet, or gone: try again until collect.
			select {
			case <-p.quit:
				return
			case <-time.After(20 * time.Millisecond):
			}
			continue
		}
		prof, err := profile.ParseData(b)
		if err != nil {
			p.logf("profile %s: %v", p.path, err)
			continue
		}
		p.cpu = append(p.cpu, prof)
	}
}

// stop ends the CPU profiling, after the second under way.
func (p *profiler) stop() {
	p.once.Do(func() { close(p.quit) })
	<-p.done
}

// collect writes the heap profile (in use, after a GC) as path.heap and the
// merged CPU profile as path, while the process still runs, and returns
// the files written.
func (p *profiler) collect() ([]string, error) {
	heap, herr := fetch(p.base + "/heap?gc=1")
	p.stop()
	if len(p.cpu) == 0 {
		return nil, errors.New("no CPU profile read: the process never answered on its --pprof address")
	}
	merged, err := profile.Merge(p.cpu)
	if err != nil {
		return nil, fmt.Errorf("merging %d CPU profiles: %w", len(p.cpu), err)
	}
	f, err := os.Create(p.path + ".tmp")
	if err != nil {
		return nil, err
	}
	if err := merged.Write(f); err != nil {
		f.Close()
		return nil, err
	}
	if err := f.Close(); err != nil {
		return nil, err
	}
	if err := os.Rename(p.path+".tmp", p.path); err != nil {
		return nil, err
	}
	files := []string{p.path}
	if herr != nil {
		return files, fmt.Errorf("heap profile: %w", herr)
	}
	if err := os.WriteFile(p.path+".heap", heap, 0o644); err != nil {
		return files, err
	}
	return append(files, p.path+".heap"), nil
}

func fetch(url string) ([]byte, error) {
	resp, err := pprofClient.Get(url)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s: %s: %.200s", url, resp.Status, b)
	}
	return b, nil
}

// collectProfile writes a profiled provlog's CPU and heap profiles; it
// runs before the process is stopped.
func (b *bench) collectProfile(p *proc) {
	if p.prof == nil {
		return
	}
	files, err := p.prof.collect()
	b.res.profiles = append(b.res.profiles, files...)
	if err != nil {
		b.logf("profile of %s: %v", p.name, err)
	}
}
