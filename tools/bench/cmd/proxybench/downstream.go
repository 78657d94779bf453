package main

// The downstream server both paths call: npm's server-everything (the
// default: its echo tool with a message of -echo-bytes, 1 KiB, as issue
// 12 asks) or go-sdk's conformance everything-server (-downstream go: its
// test_simple_text tool, no arguments).

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
)

// downstreamJS is where tools/mcptest/install.sh puts server-everything.
const downstreamJS = "node_modules/@modelcontextprotocol/server-everything/dist/index.js"

// checkDownstream resolves c's downstream and its defaults.
func (c *config) checkDownstream() error {
	switch c.downstream {
	case "npm":
		if c.tool == "" {
			c.tool = "echo"
		}
		if c.serverJS == "" {
			dir := os.Getenv("PROVLOG_MCPTEST_DIR")
			if dir == "" {
				return errors.New("no server-everything: set PROVLOG_MCPTEST_DIR (eval \"$(bash tools/mcptest/install.sh)\" in the main module) or pass -server-everything")
			}
			c.serverJS = filepath.Join(dir, downstreamJS)
		}
		if _, err := os.Stat(c.serverJS); err != nil {
			return fmt.Errorf("server-everything: %w", err)
		}
		node, err := exec.LookPath(c.node)
		if err != nil {
			return fmt.Errorf("-node: %w", err)
		}
		c.node = node
	case "go":
		if c.tool == "" {
			c.tool = "test_simple_text"
		}
		if c.everything == "" {
			return errors.New("no everything-server: set PROVLOG_EVERYTHING_SERVER (eval \"$(bash tools/mcptest/install.sh)\" in the main module) or pass -everything")
		}
		if _, err := os.Stat(c.everything); err != nil {
			return fmt.Errorf("everything-server: %w", err)
		}
	default:
		return fmt.Errorf("-downstream %q: want npm or go", c.downstream)
	}
	return nil
}

// stdioCommand is the command line of the downstream over stdio.
func (c *config) stdioCommand() []string {
	if c.downstream == "npm" {
		return []string{c.node, c.serverJS, "stdio"}
	}
	return []string{c.everything}
}

// httpCommand is the command line and environment of the downstream
// serving streamable HTTP on 127.0.0.1:port.
func (c *config) httpCommand(addr string) (args, env []string) {
	if c.downstream == "npm" {
		_, port, _ := strings.Cut(addr, ":")
		return []string{c.node, c.serverJS, "streamableHttp"}, []string{"PORT=" + port}
	}
	return []string{c.everything, "-http", addr}, nil
}

// configCommand is stdioCommand as a provlog config's command: value.
func (c *config) configCommand() string {
	var q []string
	for _, a := range c.stdioCommand() {
		q = append(q, strconv.Quote(a))
	}
	return "    command: [" + strings.Join(q, ", ") + "]\n"
}

// toolArgs are the arguments of every call.
func (c *config) toolArgs() map[string]any {
	if c.downstream == "npm" && c.tool == "echo" {
		return map[string]any{"message": strings.Repeat("x", c.echoBytes)}
	}
	return map[string]any{}
}

// describeDownstream names the downstream for the output's header.
func (c *config) describeDownstream() string {
	if c.downstream == "npm" {
		what := "npm @modelcontextprotocol/server-everything (" + c.serverJS + "), tool " + c.tool
		if c.tool == "echo" {
			what += fmt.Sprintf(" with a %d-byte message", c.echoBytes)
		}
		return what
	}
	return "go-sdk v1.8.0 conformance everything-server (" + c.everything + "), tool " + c.tool
}
