package authn_test

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math/big"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"

	"github.com/provlog/provlog/proxy/authn"
	"github.com/provlog/provlog/proxy/authn/authntest"
)

// BenchmarkAuthenticate measures what validation adds to a call once the
// issuer's key set is cached (the target: 50 µs): "repeat" is a
// client's next call with the token it used before (a hash and a lookup),
// "first" a token never seen (signature and claims checked), per key
// type; "static" a static token among 16, for reference. Beside "first"
// run its parts: go-jose's parse and signature check alone, and the
// standard library's signature check alone (the floor: on a 2-core
// shared Xeon an ES256 check alone takes 85 µs, over the target).
func BenchmarkAuthenticate(b *testing.B) {
	ctx := context.Background()
	for _, alg := range []jose.SignatureAlgorithm{jose.RS256, jose.ES256} {
		is := authntest.Start(b)
		is.Rotate(b, alg)
		cfg := &authn.Config{Resource: resource, Issuers: []authn.IssuerConfig{{Issuer: is.URL, JWKSURL: is.JWKSURL()}}}
		if err := cfg.Check(); err != nil {
			b.Fatal(err)
		}
		a, err := authn.New(cfg, authn.Options{})
		if err != nil {
			b.Fatal(err)
		}
		c := is.Claims(resource, "alice", "provlog.tools", "provlog.tasks")
		c["act"] = map[string]any{"sub": "agent-7"}
		tok := is.Mint(b, c)
		if _, err := a.Authenticate(ctx, tok); err != nil {
			b.Fatal(err)
		}
		b.Run(fmt.Sprintf("%s/repeat", alg), func(b *testing.B) {
			defer cpuPerOp(b)()
			for b.Loop() {
				if _, err := a.Authenticate(ctx, tok); err != nil {
					b.Fatal(err)
				}
			}
		})
		// Distinct tokens, minted beforehand (each differs in its jti);
		// more than the cache holds, so each one is checked in full.
		toks := make([]string, 4200)
		for i := range toks {
			c["jti"] = fmt.Sprintf("bench-%d", i)
			toks[i] = is.Mint(b, c)
		}
		// The reference: go-jose's parse and signature check alone, which
		// "first" does once and adds its claims checks to.
		keys := fetchKeys(b, is.JWKSURL())
		b.Run(fmt.Sprintf("%s/jose-verify-only", alg), func(b *testing.B) {
			defer cpuPerOp(b)()
			i := 0
			for b.Loop() {
				jws, err := jose.ParseSignedCompact(toks[i%len(toks)], []jose.SignatureAlgorithm{alg})
				if err != nil {
					b.Fatal(err)
				}
				k := keys.Key(jws.Signatures[0].Protected.KeyID)
				if _, err := jws.Verify(k[0].Key); err != nil {
					b.Fatal(err)
				}
				i++
			}
		})
		// Below that, the signature check itself with the standard library
		// alone (no JOSE parsing at all): the floor of a first use.
		b.Run(fmt.Sprintf("%s/stdlib-signature-only", alg), func(b *testing.B) {
			in, sig := signingInput(b, toks[0])
			digest := sha256.Sum256(in)
			jws, err := jose.ParseSignedCompact(toks[0], []jose.SignatureAlgorithm{alg})
			if err != nil {
				b.Fatal(err)
			}
			pub := keys.Key(jws.Signatures[0].Protected.KeyID)[0].Key
			defer cpuPerOp(b)()
			for b.Loop() {
				var ok bool
				switch k := pub.(type) {
				case *ecdsa.PublicKey:
					r, s := new(big.Int).SetBytes(sig[:32]), new(big.Int).SetBytes(sig[32:])
					ok = ecdsa.Verify(k, digest[:], r, s)
				case *rsa.PublicKey:
					ok = rsa.VerifyPKCS1v15(k, crypto.SHA256, digest[:], sig) == nil
				}
				if !ok {
					b.Fatal("the signature does not verify")
				}
			}
		})
		b.Run(fmt.Sprintf("%s/first", alg), func(b *testing.B) {
			a, err := authn.New(cfg, authn.Options{}) // none of toks seen before
			if err != nil {
				b.Fatal(err)
			}
			if _, err := a.Authenticate(ctx, tok); err != nil { // the key set, cached
				b.Fatal(err)
			}
			defer cpuPerOp(b)()
			i := 0
			for b.Loop() {
				if _, err := a.Authenticate(ctx, toks[i%len(toks)]); err != nil {
					b.Fatal(err)
				}
				i++
			}
		})
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
			if _, err := a.Authenticate(ctx, "token-15-xxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"); err != nil {
				b.Fatal(err)
			}
		}
	})
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

// signingInput splits a compact JWS into what is signed and the
// signature.
func signingInput(b *testing.B, tok string) ([]byte, []byte) {
	i := strings.LastIndexByte(tok, '.')
	sig, err := base64.RawURLEncoding.DecodeString(tok[i+1:])
	if err != nil {
		b.Fatal(err)
	}
	return []byte(tok[:i]), sig
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
