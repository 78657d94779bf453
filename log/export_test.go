package log

import (
	"encoding/base64"
	"encoding/binary"
	"errors"
	"math"
	"time"

	"golang.org/x/mod/sumdb/note"
)

// Test-only API: the package's own code never needs these.

// CosignatureTime returns the time a cosignature/v1 signature was made,
// from its timestamp.
func CosignatureTime(sig note.Signature) (time.Time, error) {
	b, err := base64.StdEncoding.DecodeString(sig.Base64)
	if err != nil || len(b) != 4+cosignatureSize {
		return time.Time{}, errors.New("cosigner: malformed cosignature")
	}
	ts := binary.BigEndian.Uint64(b[4:])
	if ts > math.MaxInt64 {
		return time.Time{}, errors.New("cosigner: cosignature timestamp out of range")
	}
	return time.Unix(int64(ts), 0).UTC(), nil
}
