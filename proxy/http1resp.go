package proxy

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httputil"
	"strconv"
)

// Reading the proxy's own connections' responses (http1.go): the status
// line and header of an HTTP/1.x response to a POST, and its body as
// RFC 9112 §6.3 frames it. Of the header it keeps what the proxy reads
// (Content-Type) and what frames the body (Content-Length,
// Transfer-Encoding, Connection); net/http's ReadResponse built a map of
// every field, with a string for each name and value, for every call. It
// reads no more than net/http would and refuses what is ambiguous: a
// line folded over two (obsolete), a field name that is not a token, a
// value with control characters, Content-Lengths that disagree, a
// transfer coding other than chunked, a head over maxResponseHead. One
// pass over the bytes, each looked at a bounded number of times.

// maxResponseHead bounds a response's status line and header fields, and
// a chunked body's trailer.
const maxResponseHead = 1 << 20

var errResponseHead = errors.New("malformed HTTP response")

// readResponse reads a response from br. Its body reads to the body's
// end (io.EOF) and no further, so that br is at the next response.
func readResponse(br *bufio.Reader) (*http.Response, error) {
	budget := maxResponseHead
	line, err := readHeadLine(br, &budget)
	if err != nil {
		return nil, err
	}
	resp := &http.Response{ProtoMajor: 1, Body: http.NoBody, ContentLength: -1}
	proto, status, _ := bytes.Cut(line, []byte(" "))
	switch string(proto) {
	case "HTTP/1.1":
		resp.Proto, resp.ProtoMinor = "HTTP/1.1", 1
	case "HTTP/1.0":
		resp.Proto = "HTTP/1.0"
	default:
		return nil, fmt.Errorf("%w: protocol %.40q", errResponseHead, proto)
	}
	if len(status) < 3 || len(status) > 3 && status[3] != ' ' || !digits(status[:3]) {
		return nil, fmt.Errorf("%w: status %.40q", errResponseHead, status)
	}
	resp.StatusCode = int(status[0]-'0')*100 + int(status[1]-'0')*10 + int(status[2]-'0')
	f := headFields{length: -1}
	for {
		if line, err = readHeadLine(br, &budget); err != nil {
			return nil, err
		}
		if len(line) == 0 {
			break
		}
		if err := f.add(line); err != nil {
			return nil, err
		}
	}
	resp.Header = http.Header{}
	if f.contentType != nil {
		resp.Header["Content-Type"] = []string{string(f.contentType)}
	}
	if f.location != nil {
		resp.Header["Location"] = []string{string(f.location)} // for the error that names it
	}
	resp.Close = f.close || resp.ProtoMinor == 0 && !f.keepAlive
	code := resp.StatusCode
	switch {
	case code/100 == 1 || code == http.StatusNoContent || code == http.StatusNotModified:
		resp.ContentLength = 0 // no body, whatever the header says
	case f.chunked && resp.ProtoMinor == 1: // HTTP/1.0 has no transfer codings
		resp.TransferEncoding = []string{"chunked"}
		resp.Body = io.NopCloser(&chunkedBody{br: br, r: httputil.NewChunkedReader(br)})
	case f.length >= 0:
		resp.ContentLength = f.length
		if f.length > 0 {
			resp.Body = io.NopCloser(&lengthBody{br: br, n: f.length})
		}
	default:
		resp.Close = true // the body ends with the connection
		resp.Body = io.NopCloser(br)
	}
	return resp, nil
}

// headFields are the header fields readResponse keeps.
type headFields struct {
	contentType      []byte
	location         []byte
	length           int64 // -1: none
	hasLength        bool
	chunked          bool
	close, keepAlive bool // Connection's tokens
}

// add reads one header field line.
func (f *headFields) add(line []byte) error {
	name, value, ok := bytes.Cut(line, []byte(":"))
	if !ok || !validHeaderName(name) {
		return fmt.Errorf("%w: header line %.60q", errResponseHead, line)
	}
	value = bytes.Trim(value, " \t")
	if !validHeaderValue(value) {
		return fmt.Errorf("%w: the value of %.40q", errResponseHead, name)
	}
	switch {
	case asciiEqualFold(name, "Content-Type"):
		if f.contentType == nil {
			f.contentType = bytes.Clone(value)
		}
	case asciiEqualFold(name, "Location"):
		if f.location == nil {
			f.location = bytes.Clone(value)
		}
	case asciiEqualFold(name, "Content-Length"):
		n, err := strconv.ParseUint(string(value), 10, 63)
		if err != nil || !digits(value) || f.hasLength && int64(n) != f.length {
			return fmt.Errorf("%w: Content-Length %.40q", errResponseHead, value)
		}
		f.length, f.hasLength = int64(n), true
	case asciiEqualFold(name, "Transfer-Encoding"):
		if f.chunked || !asciiEqualFold(value, "chunked") {
			return fmt.Errorf("%w: Transfer-Encoding %.40q (only one chunked is read)", errResponseHead, value)
		}
		f.chunked = true
	case asciiEqualFold(name, "Connection"):
		for tok := range bytes.SplitSeq(value, []byte(",")) {
			tok = bytes.Trim(tok, " \t")
			f.close = f.close || asciiEqualFold(tok, "close")
			f.keepAlive = f.keepAlive || asciiEqualFold(tok, "keep-alive")
		}
	}
	return nil
}

// readHeadLine returns the next line of a response head without its end
// (LF or CRLF), taking its bytes from budget. A line starting with white
// space (obsolete folding) is refused.
func readHeadLine(br *bufio.Reader, budget *int) ([]byte, error) {
	line, err := br.ReadSlice('\n')
	if errors.Is(err, bufio.ErrBufferFull) {
		// Longer than the reader's buffer: gather it.
		long := bytes.Clone(line)
		for errors.Is(err, bufio.ErrBufferFull) && len(long) <= *budget {
			line, err = br.ReadSlice('\n')
			long = append(long, line...)
		}
		line = long
	}
	if *budget -= len(line); *budget < 0 {
		return nil, fmt.Errorf("%w: its head exceeds %d bytes", errResponseHead, maxResponseHead)
	}
	if err != nil {
		if errors.Is(err, io.EOF) && len(line) > 0 {
			err = io.ErrUnexpectedEOF
		}
		return nil, err
	}
	line = line[:len(line)-1]
	if n := len(line); n > 0 && line[n-1] == '\r' {
		line = line[:n-1]
	}
	if len(line) > 0 && (line[0] == ' ' || line[0] == '\t') {
		return nil, fmt.Errorf("%w: a folded header line", errResponseHead)
	}
	return line, nil
}

func digits(b []byte) bool {
	for _, c := range b {
		if c < '0' || c > '9' {
			return false
		}
	}
	return len(b) > 0
}

// asciiEqualFold reports whether b is s, ignoring ASCII case.
func asciiEqualFold(b []byte, s string) bool {
	if len(b) != len(s) {
		return false
	}
	for i := range len(b) {
		x, y := b[i], s[i]
		if 'A' <= x && x <= 'Z' {
			x += 'a' - 'A'
		}
		if 'A' <= y && y <= 'Z' {
			y += 'a' - 'A'
		}
		if x != y {
			return false
		}
	}
	return true
}

// A lengthBody is a body of n bytes; one that ends sooner is cut
// (io.ErrUnexpectedEOF).
type lengthBody struct {
	br *bufio.Reader
	n  int64
}

func (b *lengthBody) Read(p []byte) (int, error) {
	if b.n <= 0 {
		return 0, io.EOF
	}
	if int64(len(p)) > b.n {
		p = p[:b.n]
	}
	n, err := b.br.Read(p)
	b.n -= int64(n)
	if errors.Is(err, io.EOF) && b.n > 0 {
		err = io.ErrUnexpectedEOF
	} else if err == nil && b.n == 0 {
		err = io.EOF
	}
	return n, err
}

// A chunkedBody is a chunked body, read to the end of its trailer.
type chunkedBody struct {
	br  *bufio.Reader
	r   io.Reader // the chunks' data
	err error     // once the last chunk is read
}

func (b *chunkedBody) Read(p []byte) (int, error) {
	if b.err != nil {
		return 0, b.err
	}
	n, err := b.r.Read(p)
	if errors.Is(err, io.EOF) {
		// The last chunk: the trailer's fields follow, then an empty line.
		budget := maxResponseHead
		for {
			line, lerr := readHeadLine(b.br, &budget)
			if lerr != nil {
				if errors.Is(lerr, io.EOF) {
					lerr = io.ErrUnexpectedEOF
				}
				err = lerr
				break
			}
			if len(line) == 0 {
				break
			}
		}
		b.err = err
	}
	return n, err
}
