package authn_test

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math/big"
	"net/http"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"

	"github.com/provlog/provlog/proxy/authn"
	"github.com/provlog/provlog/proxy/authn/authntest"
)

// BenchmarkAuthenticate measures what validation adds to a call once the
// issuer's key set is cached (the target: 50 µs), per key type,
// side by side with its references in one run:
//
//   - repeat: a client's next call with the token it used before (a hash
//     and a lookup in the cache of validated tokens);
//   - first: a token never seen (signature and claims checked);
//   - mix-N: each token used for N calls, the first of them its first use
//     (the amortized cost per call, which is not the cost of a first use);
//   - jose-parse-only, jose-verify-only: go-jose's parse, and its parse and
//     signature check, alone (what "first" does once and adds its claims
//     checks, the hash and the cache to);
//   - stdlib-signature-only: the signature check with the standard library
//     alone, the signing input's hash included (no JOSE parsing at all):
//     the floor of a first use for any implementation on crypto/rsa,
//     crypto/ecdsa and crypto/ed25519;
//   - paired: first, jose-verify-only and stdlib-signature-only in turn on
//     the same token, each call timed, reporting each one's median (on a
//     shared machine the three see the same load, and a median is not
//     moved by the calls another process preempted);
//   - static: a static token among 16, for reference.
func BenchmarkAuthenticate(b *testing.B) {
	for _, alg := range []jose.SignatureAlgorithm{jose.RS256, jose.ES256, jose.EdDSA} {
		f := newBenchIssuer(b, alg)
		b.Run(fmt.Sprintf("%s/repeat", alg), f.repeat)
		b.Run(fmt.Sprintf("%s/first", alg), f.mix(1))
		b.Run(fmt.Sprintf("%s/mix-10", alg), f.mix(10))
		b.Run(fmt.Sprintf("%s/mix-100", alg), f.mix(100))
		b.Run(fmt.Sprintf("%s/jose-parse-only", alg), f.joseParse)
		b.Run(fmt.Sprintf("%s/jose-verify-only", alg), f.joseVerify)
		b.Run(fmt.Sprintf("%s/stdlib-signature-only", alg), f.stdlibVerify)
		b.Run(fmt.Sprintf("%s/paired", alg), f.paired)
	}
	b.Run("static", func(b *testing.B) {
		tokens := map[string]string{}
		for i := range 16 {
			tokens[fmt.Sprintf("token-%02d-xxxxxxxxxxxxxxxxxxxxxxxxxxxxxx", i)] = fmt.Sprintf("actor-%d", i)
		}
		a := authn.Static(func(tok string) (string, bool, bool) {
			actor, ok := tokens[tok]
			return actor, false, ok
		})
		defer cpuPerOp(b)()
		for b.Loop() {
			if _, err := a.Authenticate(context.Background(), "token-15-xxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// benchIssuer is one key type's issuer, config and tokens for
// BenchmarkAuthenticate.
type benchIssuer struct {
	alg  jose.SignatureAlgorithm
	cfg  *authn.Config
	tok  string   // seen once by the authenticators before they are timed
	toks []string // distinct tokens (each differs in its jti), more than the cache holds
	keys *jose.JSONWebKeySet
}

func newBenchIssuer(b *testing.B, alg jose.SignatureAlgorithm) *benchIssuer {
	is := authntest.Start(b)
	is.Rotate(b, alg)
	f := &benchIssuer{alg: alg, cfg: &authn.Config{Resource: resource, Issuers: []authn.IssuerConfig{{Issuer: is.URL, JWKSURL: is.JWKSURL()}}}}
	if err := f.cfg.Check(); err != nil {
		b.Fatal(err)
	}
	c := is.Claims(resource, "alice", "provlog.tools", "provlog.tasks")
	c["act"] = map[string]any{"sub": "agent-7"}
	f.tok = is.Mint(b, c)
	f.toks = make([]string, 4200)
	for i := range f.toks {
		c["jti"] = fmt.Sprintf("bench-%d", i)
		f.toks[i] = is.Mint(b, c)
	}
	f.keys = fetchKeys(b, is.JWKSURL())
	return f
}

// authenticator returns a new authenticator that has seen f.tok only, so
// its key set is cached and none of f.toks is.
func (f *benchIssuer) authenticator(b *testing.B) *authn.Authenticator {
	a, err := authn.New(f.cfg, authn.Options{})
	if err != nil {
		b.Fatal(err)
	}
	if _, err := a.Authenticate(context.Background(), f.tok); err != nil {
		b.Fatal(err)
	}
	return a
}

func (f *benchIssuer) repeat(b *testing.B) {
	a, ctx := f.authenticator(b), context.Background()
	defer cpuPerOp(b)()
	for b.Loop() {
		if _, err := a.Authenticate(ctx, f.tok); err != nil {
			b.Fatal(err)
		}
	}
}

// mix uses each token for n calls in a row: n = 1 is every call a first
// use. (The cache holds fewer tokens than f.toks, so a token coming round
// again is a first use again.)
func (f *benchIssuer) mix(n int) func(*testing.B) {
	return func(b *testing.B) {
		a, ctx := f.authenticator(b), context.Background()
		defer cpuPerOp(b)()
		i := 0
		for b.Loop() {
			if _, err := a.Authenticate(ctx, f.toks[i/n%len(f.toks)]); err != nil {
				b.Fatal(err)
			}
			i++
		}
	}
}

func (f *benchIssuer) joseParse(b *testing.B) {
	defer cpuPerOp(b)()
	i := 0
	for b.Loop() {
		if _, err := jose.ParseSignedCompact(f.toks[i%len(f.toks)], []jose.SignatureAlgorithm{f.alg}); err != nil {
			b.Fatal(err)
		}
		i++
	}
}

func (f *benchIssuer) joseVerify(b *testing.B) {
	defer cpuPerOp(b)()
	i := 0
	for b.Loop() {
		joseCheck(b, f, f.toks[i%len(f.toks)])
		i++
	}
}

func (f *benchIssuer) stdlibVerify(b *testing.B) {
	defer cpuPerOp(b)()
	i := 0
	for b.Loop() {
		stdlibCheck(b, f, f.toks[i%len(f.toks)])
		i++
	}
}

// joseCheck is go-jose's parse and signature check of tok, alone.
func joseCheck(b *testing.B, f *benchIssuer, tok string) {
	jws, err := jose.ParseSignedCompact(tok, []jose.SignatureAlgorithm{f.alg})
	if err != nil {
		b.Fatal(err)
	}
	k := f.keys.Key(jws.Signatures[0].Protected.KeyID)
	if _, err := jws.Verify(k[0].Key); err != nil {
		b.Fatal(err)
	}
}

// stdlibCheck is the signature check of tok with the standard library
// alone: the signature decoded, the signing input hashed and checked
// with the issuer's one key (no header read, no key looked up).
func stdlibCheck(b *testing.B, f *benchIssuer, tok string) {
	i := strings.LastIndexByte(tok, '.')
	in := []byte(tok[:i])
	sig, err := base64.RawURLEncoding.DecodeString(tok[i+1:])
	if err != nil {
		b.Fatal(err)
	}
	var ok bool
	switch k := f.keys.Keys[0].Key.(type) {
	case *ecdsa.PublicKey:
		digest := sha256.Sum256(in)
		r, s := new(big.Int).SetBytes(sig[:32]), new(big.Int).SetBytes(sig[32:])
		ok = ecdsa.Verify(k, digest[:], r, s)
	case *rsa.PublicKey:
		digest := sha256.Sum256(in)
		ok = rsa.VerifyPKCS1v15(k, crypto.SHA256, digest[:], sig) == nil
	case ed25519.PublicKey:
		ok = ed25519.Verify(k, in, sig)
	}
	if !ok {
		b.Fatal("the signature does not verify")
	}
}

// paired runs a first use, go-jose's parse and check, and the standard
// library's check in turn, each on the same token, and reports the median
// time of each.
func (f *benchIssuer) paired(b *testing.B) {
	a, ctx := f.authenticator(b), context.Background()
	checks := [3]func(tok string){
		func(tok string) {
			if _, err := a.Authenticate(ctx, tok); err != nil {
				b.Fatal(err)
			}
		},
		func(tok string) { joseCheck(b, f, tok) },
		func(tok string) { stdlibCheck(b, f, tok) },
	}
	var took [3][]time.Duration
	i := 0
	for b.Loop() {
		tok := f.toks[i%len(f.toks)]
		for k := range checks {
			j := (i + k) % len(checks) // each goes first in turn, meeting the token uncached
			start := time.Now()
			checks[j](tok)
			took[j] = append(took[j], time.Since(start))
		}
		i++
	}
	med := func(d []time.Duration) float64 {
		slices.Sort(d)
		return float64(d[len(d)/2].Nanoseconds())
	}
	b.ReportMetric(med(took[0]), "first-med-ns")
	b.ReportMetric(med(took[1]), "jose-med-ns")
	b.ReportMetric(med(took[2]), "stdlib-med-ns")
}

// cpuPerOp reports the process's CPU time per operation beside the wall
// time, which on a shared machine measures the load as much as the code.
func cpuPerOp(b *testing.B) func() {
	start := cpuTime()
	return func() {
		if b.N > 0 {
			b.ReportMetric(float64((cpuTime()-start).Nanoseconds())/float64(b.N), "cpu-ns/op")
		}
	}
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func fetchKeys(b *testing.B, url string) *jose.JSONWebKeySet {
	resp, err := http.Get(url)
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	var set jose.JSONWebKeySet
	if err := json.NewDecoder(resp.Body).Decode(&set); err != nil {
		b.Fatal(err)
	}
	return &set
}
