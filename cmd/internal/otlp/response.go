package otlp

import (
	"fmt"

	"google.golang.org/protobuf/encoding/protowire"
)

// PartialSuccess is a receiver's answer that it accepted a batch but
// rejected some of its spans, or has something to say about it.
type PartialSuccess struct {
	Rejected int64
	Message  string
}

func (p *PartialSuccess) Error() string {
	msg := p.Message
	if msg == "" {
		msg = "empty message"
	}
	return fmt.Sprintf("OTLP partial success: %s (%d spans rejected)", msg, p.Rejected)
}

// partialSuccess reads an ExportTraceServiceResponse (protobuf): its
// field 1, partial_success, holds rejected_spans (1, int64) and
// error_message (2, string). It returns nil for a full success, a
// *PartialSuccess if the receiver rejected spans or said why, and an
// error if the answer does not parse. Fields it does not know are
// skipped; one pass over b.
func partialSuccess(b []byte) error {
	var p PartialSuccess
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return badResponse(n)
		}
		b = b[n:]
		if num != 1 || typ != protowire.BytesType {
			if n = protowire.ConsumeFieldValue(num, typ, b); n < 0 {
				return badResponse(n)
			}
			b = b[n:]
			continue
		}
		msg, n := protowire.ConsumeBytes(b)
		if n < 0 {
			return badResponse(n)
		}
		b = b[n:]
		if err := p.read(msg); err != nil {
			return err
		}
	}
	if p.Rejected == 0 && p.Message == "" {
		return nil
	}
	return &p
}

// read reads an ExportTracePartialSuccess into p (a message given twice
// is merged, as protobuf merges it).
func (p *PartialSuccess) read(b []byte) error {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return badResponse(n)
		}
		b = b[n:]
		switch {
		case num == 1 && typ == protowire.VarintType:
			v, n := protowire.ConsumeVarint(b)
			if n < 0 {
				return badResponse(n)
			}
			p.Rejected, b = int64(v), b[n:]
		case num == 2 && typ == protowire.BytesType:
			v, n := protowire.ConsumeBytes(b)
			if n < 0 {
				return badResponse(n)
			}
			p.Message, b = string(v), b[n:]
		default:
			if n = protowire.ConsumeFieldValue(num, typ, b); n < 0 {
				return badResponse(n)
			}
			b = b[n:]
		}
	}
	return nil
}

func badResponse(n int) error {
	return fmt.Errorf("the receiver's answer is not an ExportTraceServiceResponse: %w", protowire.ParseError(n))
}
