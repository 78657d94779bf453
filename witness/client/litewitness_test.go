package client

// Interoperability with an independent witness: litewitness from
// filippo.io/torchwood v0.6.1 cosigns provlog checkpoints, submitted by
// this package, and log.Receipt.VerifyWitnessed accepts its cosignatures.
//
// The binaries come from tools/witnesstest/install.sh:
// PROVLOG_LITEWITNESS (and PROVLOG_WITNESSCTL when it builds; otherwise the
// sqlite3 program sets up litewitness's database with the statements
// witnessctl runs). litewitness keeps its key in an ssh-agent, so the test
// also needs ssh-agent, ssh-add and ssh-keygen. Without them the test
// skips, except in CI (CI=true), where it fails.

import (
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/mod/sumdb/note"

	"github.com/provlog/provlog/log"
	"github.com/provlog/provlog/log/logtest/proctest"
	"github.com/provlog/provlog/witness/witnesstest"
)

func need(t *testing.T, what, path string) string {
	t.Helper()
	if path != "" {
		if p, err := exec.LookPath(path); err == nil {
			return p
		}
	}
	msg := fmt.Sprintf("%s not found (%q); run: eval \"$(bash tools/witnesstest/install.sh)\" (and install openssh-client, sqlite3)", what, path)
	if os.Getenv("CI") == "true" {
		t.Fatal(msg)
	}
	t.Skip(msg)
	return ""
}

// litewitness is a running litewitness process.
type litewitness struct {
	url  string
	vkey string // as litewitness logged it
	pub  ed25519.PublicKey
	name string
	db   string
}

// startLitewitness starts an ssh-agent holding a new Ed25519 key and a
// litewitness using it, following the logs in logs (origin -> vkey).
func startLitewitness(t *testing.T, name string, logs map[string]string) *litewitness {
	t.Helper()
	bin := need(t, "PROVLOG_LITEWITNESS", os.Getenv("PROVLOG_LITEWITNESS"))
	sshAgent := need(t, "ssh-agent", "ssh-agent")
	sshAdd := need(t, "ssh-add", "ssh-add")
	sshKeygen := need(t, "ssh-keygen", "ssh-keygen")
	ctl := os.Getenv("PROVLOG_WITNESSCTL")
	var sqlite string
	if ctl == "" {
		sqlite = need(t, "sqlite3 (or PROVLOG_WITNESSCTL)", "sqlite3")
	}

	// A short directory: the agent's socket path must fit in sun_path.
	dir, err := os.MkdirTemp("", "lw")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	key := filepath.Join(dir, "key")
	if out, err := exec.Command(sshKeygen, "-q", "-t", "ed25519", "-N", "", "-C", "", "-f", key).CombinedOutput(); err != nil {
		t.Fatalf("ssh-keygen: %v\n%s", err, out)
	}
	pub := readSSHPublicKey(t, key+".pub")

	sock := filepath.Join(dir, "s")
	startProcess(t, "ssh-agent", exec.Command(sshAgent, "-D", "-a", sock))
	proctest.WaitFor(t, "the ssh-agent socket", func() bool { _, err := os.Stat(sock); return err == nil })
	add := exec.Command(sshAdd, key)
	add.Env = append(os.Environ(), "SSH_AUTH_SOCK="+sock)
	if out, err := add.CombinedOutput(); err != nil {
		t.Fatalf("ssh-add: %v\n%s", err, out)
	}

	db := filepath.Join(dir, "litewitness.db")
	for origin, vkey := range logs {
		if ctl != "" {
			for _, args := range [][]string{{"add-log", "-db", db, "-origin", origin}, {"add-key", "-db", db, "-origin", origin, "-key", vkey}} {
				if out, err := exec.Command(ctl, args...).CombinedOutput(); err != nil {
					t.Fatalf("witnessctl %v: %v\n%s", args, err, out)
				}
			}
			continue
		}
		// What witnessctl add-log and add-key do (torchwood v0.6.1
		// cmd/witnessctl and internal/witness.OpenDB).
		script := fmt.Sprintf(`PRAGMA foreign_keys = ON;
CREATE TABLE IF NOT EXISTS log (origin TEXT PRIMARY KEY, tree_size INTEGER NOT NULL, tree_hash TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS key (origin TEXT NOT NULL, key TEXT NOT NULL, FOREIGN KEY(origin) REFERENCES log(origin));
INSERT INTO log (origin, tree_size, tree_hash) VALUES (%s, 0, %s);
INSERT INTO key (origin, key) VALUES (%s, %s);
`, sqlQuote(origin), sqlQuote(base64.StdEncoding.EncodeToString(log.EmptyRoot())), sqlQuote(origin), sqlQuote(vkey))
		cmd := exec.Command(sqlite, db)
		cmd.Stdin = strings.NewReader(script)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("sqlite3: %v\n%s", err, out)
		}
	}

	addr := fmt.Sprintf("127.0.0.1:%d", proctest.FreePort(t))
	keyHash := sha256.Sum256(pub)
	lw := exec.Command(bin, "-ssh-agent", sock, "-name", name, "-key", hex.EncodeToString(keyHash[:]), "-db", db, "-listen", addr)
	logw := &lineLogger{t: t, vkey: make(chan string, 1)}
	lw.Stderr = logw
	startProcess(t, "litewitness", lw)
	var vkey string
	select {
	case vkey = <-logw.vkey:
	case <-time.After(10 * time.Second):
		t.Fatal("litewitness did not log its verifier key")
	}
	proctest.WaitListening(t, addr, "litewitness", nil)
	return &litewitness{url: "http://" + addr, vkey: vkey, pub: pub, name: name, db: db}
}

// lineLogger takes litewitness's stderr: it passes the verifier key it
// logs on, and logs every line in verbose mode. exec.Cmd.Wait waits for
// its last write, so nothing is logged after the test.
type lineLogger struct {
	t    *testing.T
	vkey chan string
	mu   sync.Mutex
	buf  []byte
}

var vkeyRE = regexp.MustCompile(`vkey=(\S+)`)

func (l *lineLogger) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.buf = append(l.buf, p...)
	for {
		i := strings.IndexByte(string(l.buf), '\n')
		if i < 0 {
			return len(p), nil
		}
		line := string(l.buf[:i])
		l.buf = l.buf[i+1:]
		if m := vkeyRE.FindStringSubmatch(line); m != nil {
			select {
			case l.vkey <- m[1]:
			default:
			}
		}
		if testing.Verbose() {
			l.t.Logf("litewitness: %s", line)
		}
	}
}

func sqlQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

// startProcess starts cmd and stops it (SIGTERM, then SIGKILL) when the
// test ends.
func startProcess(t *testing.T, name string, cmd *exec.Cmd) *exec.Cmd {
	t.Helper()
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting %s: %v", name, err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		cmd.Process.Signal(os.Interrupt)
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			cmd.Process.Kill()
			<-done
		}
	})
	return cmd
}

// readSSHPublicKey reads an OpenSSH ed25519 public key file.
func readSSHPublicKey(t *testing.T, path string) ed25519.PublicKey {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Fields(string(b))
	if len(f) < 2 || f[0] != "ssh-ed25519" {
		t.Fatalf("%s is not an ssh-ed25519 key", path)
	}
	blob, err := base64.StdEncoding.DecodeString(f[1])
	if err != nil {
		t.Fatal(err)
	}
	// string "ssh-ed25519", string key
	read := func() []byte {
		if len(blob) < 4 {
			t.Fatal("truncated ssh key")
		}
		n := binary.BigEndian.Uint32(blob)
		if uint32(len(blob)-4) < n {
			t.Fatal("truncated ssh key")
		}
		v := blob[4 : 4+n]
		blob = blob[4+n:]
		return v
	}
	if string(read()) != "ssh-ed25519" {
		t.Fatal("not ssh-ed25519")
	}
	k := read()
	if len(k) != ed25519.PublicKeySize {
		t.Fatal("bad ed25519 key size")
	}
	return ed25519.PublicKey(k)
}

// cosignatureVKey is the cosignature/v1 verifier key for name and pub,
// computed from the spec rather than by provlog's code.
func cosignatureVKey(name string, pub ed25519.PublicKey) string {
	h := sha256.Sum256(append([]byte(name+"\n\x04"), pub...))
	return fmt.Sprintf("%s+%s+%s", name, hex.EncodeToString(h[:4]), base64.StdEncoding.EncodeToString(append([]byte{4}, pub...)))
}

func TestLitewitness(t *testing.T) {
	ctx := context.Background()
	k := witnesstest.NewKey(t, "provlog.example/interop")
	l := witnesstest.NewLog(t, k, "honest")
	lw := startLitewitness(t, "witness.example/litewitness", map[string]string{k.Verifier.Name(): k.VKey})

	// litewitness's verifier key is the one the spec gives for its key,
	// and provlog parses it.
	if want := cosignatureVKey(lw.name, lw.pub); lw.vkey != want {
		t.Fatalf("litewitness vkey %s, want %s", lw.vkey, want)
	}
	lv, err := log.NewCosignatureVerifier(lw.vkey)
	if err != nil {
		t.Fatalf("NewCosignatureVerifier(%s): %v", lw.vkey, err)
	}

	h, err := NewHTTP(lw.url, nil)
	if err != nil {
		t.Fatal(err)
	}
	w := NewWitness(h, lv, l.Store)
	// From nothing, then with consistency proofs across sizes that are and
	// are not powers of two, and once more at the same size.
	for _, n := range []uint64{1, 5, 8, 17, 256, 300, 300, 1000} {
		cp := l.GrowFast(t, n)
		c, _ := log.ParseCheckpointNote(cp)
		sigs, err := w.Cosign(ctx, cp)
		if err != nil {
			t.Fatalf("litewitness at size %d: %v", c.Size, err)
		}
		if w.Size() != c.Size {
			t.Fatalf("Size() = %d, want %d", w.Size(), c.Size)
		}
		ts, err := log.CosignatureTime(mustOpenNote(t, append(cp, sigs...), lv).Sigs[0])
		if err != nil || time.Since(ts) > time.Minute {
			t.Errorf("cosignature time %v, %v", ts, err)
		}
	}

	// A second client, knowing nothing, learns litewitness's size from its
	// 409 and goes on.
	w2 := NewWitness(h, lv, l.Store)
	cp := l.GrowFast(t, 1500)
	if _, err := w2.Cosign(ctx, cp); err != nil {
		t.Fatalf("fresh client: %v", err)
	}

	// The misbehaving twin gets a conflict, not a cosignature.
	evil := witnesstest.NewLog(t, k, "evil")
	_, err = NewWitness(h, lv, evil.Store).Cosign(ctx, evil.GrowFast(t, 2000))
	var ce *ConflictError
	if !errors.As(err, &ce) || ce.Status != http.StatusUnprocessableEntity {
		t.Fatalf("evil twin: %v, want a 422 ConflictError", err)
	}

	// A 2-of-2 policy over litewitness and provlog's own witness: the
	// Cosigner's checkpoint carries both, and receipts on it verify.
	pw := newTestWitness(t, "witness.example/provlog", k)
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	c, err := NewCosigner(CosignerOptions{
		Log:       k.Verifier,
		Witnesses: []*Witness{w, pw.client(t, l)},
		Threshold: 2,
		Interval:  20 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	go c.Run(runCtx)
	final := l.GrowFast(t, 2222)
	c.Submit(final)
	proctest.WaitFor(t, "the checkpoint at size 2222 cosigned", func() bool {
		got, _ := log.ParseCheckpointNote(c.Latest())
		return got.Size == 2222
	})
	witnesses := []note.Verifier{lv, pw.signer.Verifier()}
	for _, i := range []uint64{0, 1, 255, 1234, 2221} {
		p, err := log.ProveInclusion(ctx, l.Store, i, 2222)
		if err != nil {
			t.Fatal(err)
		}
		e, _ := l.Store.Entries(ctx, i, i+1)
		r := &log.Receipt{Extra: log.LeafHash(e[0]), Index: i, Proof: p, Checkpoint: c.Latest()}
		// Through the text form, as a verifier gets it.
		pr, err := log.ParseReceipt([]byte(r.String()))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := pr.VerifyWitnessed(log.LeafHash(e[0]), k.Verifier, witnesses, 2); err != nil {
			t.Fatalf("receipt %d: %v\n%s", i, err, r.String())
		}
		// litewitness's cosignature alone meets a 1-of-1 policy.
		if _, err := pr.VerifyWitnessed(log.LeafHash(e[0]), k.Verifier, []note.Verifier{lv}, 1); err != nil {
			t.Fatalf("receipt %d with litewitness only: %v", i, err)
		}
	}
}

func mustOpenNote(t *testing.T, msg []byte, v note.Verifier) *note.Note {
	t.Helper()
	n, err := note.Open(msg, note.VerifierList(v))
	if err != nil {
		t.Fatalf("note.Open: %v", err)
	}
	return n
}
