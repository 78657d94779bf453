package server

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
)

// Conditional requests (RFC 9110 section 13). The checkpoint, hash tiles,
// entry bundles and entries carry a strong ETag naming their content, and
// a GET or HEAD whose If-None-Match names it is answered 304 Not Modified:
// a client or cache that holds a tile revalidates it for the price of the
// headers, and /log/checkpoint, which caches must revalidate on every use
// (no-cache: a cached older checkpoint would be a rollback), costs a 304
// while it has not changed. If-Modified-Since is not used: the API has no
// modification times, and If-None-Match takes precedence anyway.
//
// Range is ignored, deliberately (RFC 9110 section 14.2 lets a server):
// hash tiles are at most 8 KiB, an entry is at most 64 KiB, and an entry
// bundle is streamed as it is read, its length not known before; tlog
// clients read them whole. Every answer is 200 with the whole body.
//
// Nothing is compressed, deliberately too. gzip made a bundle of 256
// call and call.result entries (82 KB) 4.2 times smaller at level 1 and
// 4.7 at the default level, for 2-8 ms of CPU a bundle on the 2-core
// development VM under load (10-37 MB/s): a full bundle of the largest
// entries (16 MiB) would cost a reader's token about a second of the
// sidecar's CPU, beside the agent's, on every read. Bundles are immutable:
// a caching proxy in front compresses each once.

// etagOf returns the strong ETag of content: kind (which endpoint: one
// body can be two answers, as a level-0 hash tile's body is what the
// ETag of its entry bundle is computed from) and the SHA-256 of parts.
func etagOf(kind byte, parts ...[]byte) string {
	h := sha256.New()
	for _, p := range parts {
		h.Write(p)
	}
	return `"` + string(kind) + hex.EncodeToString(h.Sum(nil)) + `"`
}

// noneMatch reports whether If-None-Match header values name etag (by
// weak comparison, as RFC 9110 section 13.1.2 asks) or are "*". It reads
// each byte a bounded number of times.
func noneMatch(values []string, etag string) bool {
	for _, v := range values {
		for tag := range strings.SplitSeq(v, ",") {
			tag = strings.TrimSpace(tag)
			if tag == "*" || strings.TrimPrefix(tag, "W/") == etag {
				return true
			}
		}
	}
	return false
}
