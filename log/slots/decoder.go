package slots

import (
	"bytes"
	"encoding/binary"
)

// A Decoder reads a record body written big-endian, as the records kept
// in slots are: Bad is set once a read runs past the end, after which
// every read returns nothing. B is what is left to read.
type Decoder struct {
	B   []byte
	Bad bool
}

// Bytes returns a copy of the next n bytes.
func (d *Decoder) Bytes(n int) []byte {
	if d.Bad || n < 0 || n > len(d.B) {
		d.Bad = true
		return nil
	}
	v := bytes.Clone(d.B[:n])
	d.B = d.B[n:]
	return v
}

// U64 returns the next 8 bytes as a number.
func (d *Decoder) U64() uint64 {
	if v := d.Bytes(8); v != nil {
		return binary.BigEndian.Uint64(v)
	}
	return 0
}

// U32 returns the next 4 bytes as a number.
func (d *Decoder) U32() uint32 {
	if v := d.Bytes(4); v != nil {
		return binary.BigEndian.Uint32(v)
	}
	return 0
}
