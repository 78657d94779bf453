package main

import (
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/provlog/provlog/log/durable"
)

// published is <data>/sidecar.json of a running HTTP sidecar, for stdio
// serves that will join it. The sidecar writes it once it serves
// (publish) and removes it as it stops; a reload that takes a new
// local.token writes it again with that token's hash (setToken), so that
// joining serves check theirs against the token the sidecar takes.
type published struct {
	mu   sync.Mutex
	path string // "" while not written
	info sidecarInfo
}

// publish writes <data>/sidecar.json; the returned func removes it. idle
// is the sidecar's sessions.idle.
func (p *published) publish(data string, addr net.Addr, actor string, idle time.Duration) (func(), error) {
	host, port, err := net.SplitHostPort(addr.String())
	if err != nil {
		return nil, err
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
		host = "127.0.0.1"
		if ip.To4() == nil {
			host = "::1"
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.info.URL, p.info.Actor, p.info.PID, p.info.SessionIdle = "http://"+net.JoinHostPort(host, port), actor, os.Getpid(), idle.String()
	path := filepath.Join(data, sidecarFile)
	if err := writeSidecarInfo(path, p.info); err != nil {
		return nil, fmt.Errorf("writing %s, which lets stdio serves of this data dir join this sidecar: %w", path, err)
	}
	p.path = path
	return func() {
		p.mu.Lock()
		defer p.mu.Unlock()
		p.path = ""
		os.Remove(path)
	}, nil
}

// token is the local.token hash joiners are told.
func (p *published) token() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.info.TokenSHA256
}

// setToken makes hash, local.token's, the one joiners check theirs
// against, writing sidecar.json again if it is written (temp file, then
// rename, 0600). If it cannot be written, file and hash stay as they were.
func (p *published) setToken(hash string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.info.TokenSHA256 == hash {
		return nil
	}
	if p.path != "" {
		info := p.info
		info.TokenSHA256 = hash
		if err := writeSidecarInfo(p.path, info); err != nil {
			return fmt.Errorf("writing %s with the hash of the new %s, which joining stdio serves check theirs against: %w", p.path, localToken, err)
		}
	}
	p.info.TokenSHA256 = hash
	return nil
}

func writeSidecarInfo(path string, info sidecarInfo) error {
	b, _ := json.Marshal(info)
	return durable.WriteFile(path, append(b, '\n'), 0o600)
}
