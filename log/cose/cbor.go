package cose

// Just enough CBOR (RFC 8949) for COSE_Sign1 receipts, in core
// deterministic encoding (§4.2.1) only: definite lengths, shortest heads,
// map keys in increasing bytewise order without duplicates. The decoder
// refuses every other spelling, so one receipt value has one byte form,
// and it reads its input once, front to back: no item claims more bytes
// than remain, so it is linear in the input.

import (
	"bytes"
	"errors"
	"fmt"
	"unicode/utf8"
)

// CBOR major types.
const (
	majorUint  = 0
	majorNeg   = 1
	majorBytes = 2
	majorText  = 3
	majorArray = 4
	majorMap   = 5
	majorTag   = 6
	majorOther = 7
)

// simpleNull is the one-byte encoding of null.
const simpleNull = 0xf6

// appendHead appends an item head with the shortest argument encoding.
func appendHead(b []byte, major byte, n uint64) []byte {
	m := major << 5
	switch {
	case n < 24:
		return append(b, m|byte(n))
	case n <= 0xff:
		return append(b, m|24, byte(n))
	case n <= 0xffff:
		return append(b, m|25, byte(n>>8), byte(n))
	case n <= 0xffffffff:
		return append(b, m|26, byte(n>>24), byte(n>>16), byte(n>>8), byte(n))
	default:
		return append(b, m|27, byte(n>>56), byte(n>>48), byte(n>>40), byte(n>>32),
			byte(n>>24), byte(n>>16), byte(n>>8), byte(n))
	}
}

func appendInt(b []byte, v int64) []byte {
	if v < 0 {
		return appendHead(b, majorNeg, uint64(-1-v))
	}
	return appendHead(b, majorUint, uint64(v))
}

func appendBytes(b, v []byte) []byte {
	return append(appendHead(b, majorBytes, uint64(len(v))), v...)
}

func appendText(b []byte, s string) []byte {
	return append(appendHead(b, majorText, uint64(len(s))), s...)
}

// errTruncated is returned for input that ends inside an item.
var errTruncated = errors.New("cbor: unexpected end of input")

// A decoder reads CBOR items from b, front to back.
type decoder struct {
	b   []byte
	off int
}

// head reads an item head. It refuses indefinite lengths, reserved
// additional information and arguments not in their shortest form.
func (d *decoder) head() (major byte, n uint64, err error) {
	if d.off >= len(d.b) {
		return 0, 0, errTruncated
	}
	ib := d.b[d.off]
	d.off++
	major, ai := ib>>5, ib&0x1f
	if ai < 24 {
		return major, uint64(ai), nil
	}
	var size int
	switch ai {
	case 24:
		size = 1
	case 25:
		size = 2
	case 26:
		size = 4
	case 27:
		size = 8
	default:
		return 0, 0, fmt.Errorf("cbor: indefinite length or reserved value 0x%02x at offset %d", ib, d.off-1)
	}
	if len(d.b)-d.off < size {
		return 0, 0, errTruncated
	}
	for _, c := range d.b[d.off : d.off+size] {
		n = n<<8 | uint64(c)
	}
	d.off += size
	if (size == 1 && n < 24) || (size > 1 && n < 1<<(4*size)) {
		return 0, 0, fmt.Errorf("cbor: argument %d at offset %d not in its shortest form", n, d.off-size-1)
	}
	return major, n, nil
}

func (d *decoder) expect(want byte, what string) (uint64, error) {
	at := d.off
	major, n, err := d.head()
	if err != nil {
		return 0, err
	}
	if major != want {
		return 0, fmt.Errorf("cbor: %s expected at offset %d", what, at)
	}
	return n, nil
}

// uint reads an unsigned integer.
func (d *decoder) uint() (uint64, error) { return d.expect(majorUint, "unsigned integer") }

// int reads an integer that fits an int64.
func (d *decoder) int() (int64, error) {
	at := d.off
	major, n, err := d.head()
	if err != nil {
		return 0, err
	}
	if (major != majorUint && major != majorNeg) || n > 1<<63-1 {
		return 0, fmt.Errorf("cbor: integer expected at offset %d", at)
	}
	if major == majorNeg {
		return -1 - int64(n), nil
	}
	return int64(n), nil
}

// length reads a head of the given major type whose argument counts bytes
// or items, each at least one byte long, that must still follow.
func (d *decoder) length(major byte, what string) (int, error) {
	n, err := d.expect(major, what)
	if err != nil {
		return 0, err
	}
	if n > uint64(len(d.b)-d.off) {
		return 0, errTruncated
	}
	return int(n), nil
}

// bytes reads a byte string; the result aliases the input.
func (d *decoder) bytes() ([]byte, error) {
	n, err := d.length(majorBytes, "byte string")
	if err != nil {
		return nil, err
	}
	v := d.b[d.off : d.off+n : d.off+n]
	d.off += n
	return v, nil
}

// text reads a text string, which must be valid UTF-8.
func (d *decoder) text() (string, error) {
	at := d.off
	n, err := d.length(majorText, "text string")
	if err != nil {
		return "", err
	}
	v := d.b[d.off : d.off+n]
	d.off += n
	if !utf8.Valid(v) {
		return "", fmt.Errorf("cbor: text string at offset %d is not UTF-8", at)
	}
	return string(v), nil
}

func (d *decoder) array() (int, error) { return d.length(majorArray, "array") }

// mapLen reads a map head; read its keys with intKey, which checks the
// deterministic order.
func (d *decoder) mapLen() (int, error) { return d.length(majorMap, "map") }

// intKey reads a map key that must be an integer encoded after prev (the
// previous key's encoding; nil for the first).
func (d *decoder) intKey(prev []byte) (int64, []byte, error) {
	at := d.off
	k, err := d.int()
	if err != nil {
		return 0, nil, err
	}
	enc := d.b[at:d.off]
	if prev != nil && bytes.Compare(prev, enc) >= 0 {
		return 0, nil, fmt.Errorf("cbor: map key at offset %d is out of order or repeated", at)
	}
	return k, enc, nil
}

func (d *decoder) null() error {
	if d.off >= len(d.b) {
		return errTruncated
	}
	if d.b[d.off] != simpleNull {
		return fmt.Errorf("cbor: null expected at offset %d", d.off)
	}
	d.off++
	return nil
}

func (d *decoder) end() error {
	if d.off != len(d.b) {
		return fmt.Errorf("cbor: %d bytes after the item", len(d.b)-d.off)
	}
	return nil
}
