package witness

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/provlog/provlog/log"
)

// MaxProofLines is the most consistency proof lines an add-checkpoint
// request may carry (c2sp.org/tlog-witness@v1.0.0): a proof in a tree of
// up to 2^63 leaves.
const MaxProofLines = 63

// MaxRequestSize bounds an add-checkpoint request body. 63 proof lines
// take under 3 KiB; the rest is room for a checkpoint carrying the 100
// signatures golang.org/x/mod/sumdb/note reads at most.
const MaxRequestSize = 64 << 10

// An AddCheckpointRequest is the body of an add-checkpoint call according
// to c2sp.org/tlog-witness@v1.0.0:
//
//	old <size>
//	<base64 consistency proof hash>   (0 to 63 lines)
//
//	<signed checkpoint note>
type AddCheckpointRequest struct {
	OldSize    uint64
	Proof      [][]byte
	Checkpoint []byte // the signed note, verbatim
}

// ParseAddCheckpoint parses an add-checkpoint request body. It checks the
// syntax only: an old size line (decimal without leading zeros), at most
// 63 proof lines of base64 SHA-256 hashes, an empty line, and a non-empty
// note ending in a newline. The note's signatures are for the witness to
// check.
func ParseAddCheckpoint(body []byte) (*AddCheckpointRequest, error) {
	if len(body) > MaxRequestSize {
		return nil, fmt.Errorf("request is over %d bytes", MaxRequestSize)
	}
	l, rest, ok := bytes.Cut(body, []byte("\n"))
	if !ok {
		return nil, errors.New("missing old size line")
	}
	old, found := strings.CutPrefix(string(l), "old ")
	if !found || !isDecimal(old) {
		return nil, errors.New("first line is not \"old <size>\" with a decimal size")
	}
	r := &AddCheckpointRequest{}
	var err error
	if r.OldSize, err = strconv.ParseUint(old, 10, 64); err != nil {
		return nil, errors.New("old size out of range")
	}
	if r.Proof, rest, err = log.ParseProofLines(rest, MaxProofLines); err != nil {
		return nil, err
	}
	if len(rest) == 0 || rest[len(rest)-1] != '\n' {
		return nil, errors.New("checkpoint missing or not ending in a newline")
	}
	r.Checkpoint = bytes.Clone(rest)
	return r, nil
}

// isDecimal reports whether s is a decimal number without leading zeros.
func isDecimal(s string) bool {
	return s != "" && (s == "0" || s[0] != '0') && strings.Trim(s, "0123456789") == ""
}

// String returns the request body.
func (r *AddCheckpointRequest) String() string {
	b := []byte("old " + strconv.FormatUint(r.OldSize, 10) + "\n")
	return string(log.AppendProofLines(b, r.Proof, r.Checkpoint))
}

// Origin returns the first line of the request's checkpoint, its origin.
func (r *AddCheckpointRequest) Origin() string {
	o, _, _ := strings.Cut(string(r.Checkpoint), "\n")
	return o
}

// An AddCheckpointer is a witness's add-checkpoint call: it returns the
// witness's cosignature lines for the request's checkpoint, or an error,
// an [*Error] when the witness refused. The witness (witness/server)
// implements it, and so does the HTTP client (witness/client), so tests
// swap one for the other.
type AddCheckpointer interface {
	AddCheckpoint(ctx context.Context, req *AddCheckpointRequest) ([]byte, error)
}

// ContentTypeSize is the content type of a 409 response, whose body is the
// witness's latest cosigned size and a newline.
const ContentTypeSize = "text/x.tlog.size"

// An Error is a witness's refusal of an add-checkpoint request, with the
// HTTP status c2sp.org/tlog-witness@v1.0.0 gives it:
//
//   - 400 Bad Request: malformed request, or old size above the checkpoint's;
//   - 403 Forbidden: no trusted signature, or one that does not verify;
//   - 404 Not Found: unknown origin;
//   - 409 Conflict: the old size is not the size of the latest checkpoint
//     the witness cosigned (Size), or the sizes match and the root hashes
//     do not;
//   - 422 Unprocessable Entity: the consistency proof does not verify, or
//     is not empty for old size 0.
//
// Beyond the spec: 405 for a method other than POST, 413 for a body over
// [MaxRequestSize], 500 when the witness failed to read or persist its
// state.
type Error struct {
	Status int
	Size   uint64 // for 409: the size of the latest checkpoint the witness cosigned
	Msg    string
}

func (e *Error) Error() string {
	msg := fmt.Sprintf("witness: %d %s", e.Status, http.StatusText(e.Status))
	if e.Status == http.StatusConflict {
		msg += fmt.Sprintf(" (witness is at size %d)", e.Size)
	}
	if e.Msg != "" {
		msg += ": " + e.Msg
	}
	return msg
}
