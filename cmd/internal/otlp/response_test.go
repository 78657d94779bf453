package otlp

import (
	"errors"
	"testing"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/proto"
)

// partialAnswer is a receiver's ExportTraceServiceResponse, encoded by
// protobuf's generated code.
func partialAnswer(rejected int64, msg string) []byte {
	b, err := proto.Marshal(&coltracepb.ExportTraceServiceResponse{
		PartialSuccess: &coltracepb.ExportTracePartialSuccess{RejectedSpans: rejected, ErrorMessage: msg},
	})
	if err != nil {
		panic(err)
	}
	return b
}

// FuzzPartialSuccess: an answer is untrusted; partialSuccess reads what
// protobuf's generated code reads from it, and never panics.
func FuzzPartialSuccess(f *testing.F) {
	f.Add(partialAnswer(2, "too old"))
	f.Add(partialAnswer(0, ""))
	f.Add([]byte{})
	f.Add(append(partialAnswer(1, "a"), partialAnswer(0, "b")...))
	f.Add([]byte{0x0a, 0x05, 0x08, 0x01, 0x12, 0x01})
	f.Add([]byte{0x10, 0x01, 0x0a, 0x00, 0x1a, 0x00})
	f.Fuzz(func(t *testing.T, b []byte) {
		err := partialSuccess(b)
		var want coltracepb.ExportTraceServiceResponse
		perr := proto.Unmarshal(b, &want)
		if perr != nil {
			return // protobuf also checks UTF-8 and groups; ours may be laxer
		}
		var ps *PartialSuccess
		switch {
		case errors.As(err, &ps):
			if ps.Rejected != want.GetPartialSuccess().GetRejectedSpans() || ps.Message != want.GetPartialSuccess().GetErrorMessage() {
				t.Fatalf("read %+v, protobuf reads %v", ps, &want)
			}
		case err != nil:
			t.Fatalf("refused what protobuf reads (%v): %v", &want, err)
		case want.GetPartialSuccess().GetRejectedSpans() != 0 || want.GetPartialSuccess().GetErrorMessage() != "":
			t.Fatalf("read no partial success, protobuf reads %v", &want)
		}
	})
}
