package main

import (
	"context"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rogpeppe/go-internal/testscript"

	"github.com/provlog/provlog/log"
	"github.com/provlog/provlog/witness/client"
	"github.com/provlog/provlog/witness/witnesstest"
)

func TestMain(m *testing.M) {
	testscript.Main(m, map[string]func(){"provlog-witness": main})
}

// TestScripts runs the scripts in testdata/script against the
// provlog-witness binary, beside two real provlog logs that share a key:
// "honest" and its forked twin "evil".
func TestScripts(t *testing.T) {
	k := witnesstest.NewKey(t, "log.test/witnessed")
	logs := map[string]*witnesstest.Log{
		"honest": witnesstest.NewLog(t, k, "honest"),
		"evil":   witnesstest.NewLog(t, k, "evil"),
	}
	testscript.Run(t, testscript.Params{
		Dir: "testdata/script",
		Setup: func(env *testscript.Env) error {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				return err
			}
			env.Setenv("ADDR", ln.Addr().String())
			env.Setenv("LOG_VKEY", k.VKey)
			env.Setenv("HONEST", logs["honest"].Prefix())
			env.Setenv("EVIL", logs["evil"].Prefix())
			return ln.Close()
		},
		Cmds: map[string]func(ts *testscript.TestScript, neg bool, args []string){
			// grow LOG N: append to the log until it has N entries.
			"grow": func(ts *testscript.TestScript, neg bool, args []string) {
				n, err := strconv.ParseUint(args[1], 10, 64)
				ts.Check(err)
				logs[args[0]].Grow(t, n)
			},
			// cosign URL VKEYFILE LOG: submit the log's latest
			// checkpoint to the witness at URL and check its cosignature.
			// With !, the witness must refuse it; the error is printed.
			"cosign": func(ts *testscript.TestScript, neg bool, args []string) {
				v, err := log.NewCosignatureVerifier(strings.TrimSpace(ts.ReadFile(args[1])))
				ts.Check(err)
				h, err := client.NewHTTP(args[0], nil)
				ts.Check(err)
				l := logs[args[2]]
				_, cp := l.Seq.Checkpoint()
				sigs, err := client.NewWitness(h, v, l.Store).Cosign(context.Background(), cp)
				if (err != nil) != neg {
					ts.Fatalf("cosign: %v", err)
				}
				if err != nil {
					ts.Stdout().Write([]byte(err.Error() + "\n"))
				} else {
					ts.Stdout().Write(sigs)
				}
			},
			// expand FILE: expand $VARS in FILE.
			"expand": func(ts *testscript.TestScript, neg bool, args []string) {
				p := ts.MkAbs(args[0])
				b, err := os.ReadFile(p)
				ts.Check(err)
				ts.Check(os.WriteFile(p, []byte(os.Expand(string(b), ts.Getenv)), 0o600))
			},
			// waitfor URL: wait until GET URL answers.
			"waitfor": func(ts *testscript.TestScript, neg bool, args []string) {
				for range 400 {
					if resp, err := http.Get(args[0]); err == nil {
						resp.Body.Close()
						return
					}
					time.Sleep(50 * time.Millisecond)
				}
				ts.Fatalf("%s did not answer", args[0])
			},
			// post URL BODY: POST BODY and print the status and answer.
			"post": func(ts *testscript.TestScript, neg bool, args []string) {
				resp, err := http.Post(args[0], "text/plain", strings.NewReader(args[1]))
				ts.Check(err)
				defer resp.Body.Close()
				var sb strings.Builder
				sb.WriteString(resp.Status + "\n")
				buf := make([]byte, 4096)
				n, _ := resp.Body.Read(buf)
				sb.Write(buf[:n])
				ts.Stdout().Write([]byte(sb.String()))
			},
		},
	})
}
