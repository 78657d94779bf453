package otlp

import (
	"math"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/sdk/instrumentation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	resourcepb "go.opentelemetry.io/proto/otlp/resource/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
)

// The transform below is the one of the SDK's own OTLP exporters
// (go.opentelemetry.io/otel/exporters/otlp/otlptrace v1.47.0,
// internal/tracetransform), field for field: TestSameAsSDKExporter
// compares the two on the wire. Only the order of the resources differs:
// here it is the order the spans came in.

// resourceSpans groups spans by resource, then by instrumentation scope.
func resourceSpans(spans []sdktrace.ReadOnlySpan) []*tracepb.ResourceSpans {
	type scopeKey struct {
		r  attribute.Distinct
		is instrumentation.Scope
	}
	rsm := map[attribute.Distinct]*tracepb.ResourceSpans{}
	ssm := map[scopeKey]*tracepb.ScopeSpans{}
	var out []*tracepb.ResourceSpans
	for _, sd := range spans {
		if sd == nil {
			continue
		}
		rk := sd.Resource().Equivalent()
		scope := sd.InstrumentationScope()
		k := scopeKey{rk, scope}
		ss, seen := ssm[k]
		if !seen {
			ss = &tracepb.ScopeSpans{Scope: scopeOf(scope), Spans: []*tracepb.Span{}, SchemaUrl: scope.SchemaURL}
			ssm[k] = ss
		}
		ss.Spans = append(ss.Spans, span(sd))
		rs, ok := rsm[rk]
		if !ok {
			rs = &tracepb.ResourceSpans{Resource: resourceOf(sd.Resource()), SchemaUrl: sd.Resource().SchemaURL()}
			rsm[rk] = rs
			out = append(out, rs)
		}
		if !seen {
			rs.ScopeSpans = append(rs.ScopeSpans, ss)
		}
	}
	return out
}

func resourceOf(r *resource.Resource) *resourcepb.Resource {
	if r == nil {
		return nil
	}
	return &resourcepb.Resource{Attributes: iterKeyValues(r.Iter())}
}

func scopeOf(s instrumentation.Scope) *commonpb.InstrumentationScope {
	if s == (instrumentation.Scope{}) {
		return nil
	}
	return &commonpb.InstrumentationScope{Name: s.Name, Version: s.Version, Attributes: iterKeyValues(s.Attributes.Iter())}
}

func span(sd sdktrace.ReadOnlySpan) *tracepb.Span {
	sc := sd.SpanContext()
	tid, sid := sc.TraceID(), sc.SpanID()
	st := sd.Status()
	s := &tracepb.Span{
		TraceId:                tid[:],
		SpanId:                 sid[:],
		TraceState:             sc.TraceState().String(),
		Status:                 status(st.Code, st.Description),
		StartTimeUnixNano:      uint64(max(0, sd.StartTime().UnixNano())),
		EndTimeUnixNano:        uint64(max(0, sd.EndTime().UnixNano())),
		Links:                  links(sd.Links()),
		Kind:                   spanKind(sd.SpanKind()),
		Name:                   sd.Name(),
		Attributes:             keyValues(sd.Attributes()),
		Events:                 events(sd.Events()),
		DroppedAttributesCount: clampUint32(sd.DroppedAttributes()),
		DroppedEventsCount:     clampUint32(sd.DroppedEvents()),
		DroppedLinksCount:      clampUint32(sd.DroppedLinks()),
	}
	parent := sd.Parent()
	if psid := parent.SpanID(); psid.IsValid() {
		s.ParentSpanId = psid[:]
	}
	s.Flags = flags(sc.TraceFlags(), parent)
	return s
}

func clampUint32(v int) uint32 {
	if v < 0 {
		return 0
	}
	if int64(v) > math.MaxUint32 {
		return math.MaxUint32
	}
	return uint32(v)
}

func status(c codes.Code, msg string) *tracepb.Status {
	code := tracepb.Status_STATUS_CODE_UNSET
	switch c {
	case codes.Ok:
		code = tracepb.Status_STATUS_CODE_OK
	case codes.Error:
		code = tracepb.Status_STATUS_CODE_ERROR
	}
	return &tracepb.Status{Code: code, Message: msg}
}

func links(ls []sdktrace.Link) []*tracepb.Span_Link {
	if len(ls) == 0 {
		return nil
	}
	out := make([]*tracepb.Span_Link, 0, len(ls))
	for _, l := range ls {
		tid, sid := l.SpanContext.TraceID(), l.SpanContext.SpanID()
		out = append(out, &tracepb.Span_Link{
			TraceId:                tid[:],
			SpanId:                 sid[:],
			Attributes:             keyValues(l.Attributes),
			DroppedAttributesCount: clampUint32(l.DroppedAttributeCount),
			Flags:                  flags(l.SpanContext.TraceFlags(), l.SpanContext),
		})
	}
	return out
}

// flags are the W3C trace flags in the low byte, and whether the parent
// (or linked span) is known to be remote, and is.
func flags(tf trace.TraceFlags, parent trace.SpanContext) uint32 {
	f := uint32(tf) | uint32(tracepb.SpanFlags_SPAN_FLAGS_CONTEXT_HAS_IS_REMOTE_MASK)
	if parent.IsRemote() {
		f |= uint32(tracepb.SpanFlags_SPAN_FLAGS_CONTEXT_IS_REMOTE_MASK)
	}
	return f
}

func events(es []sdktrace.Event) []*tracepb.Span_Event {
	if len(es) == 0 {
		return nil
	}
	out := make([]*tracepb.Span_Event, len(es))
	for i, e := range es {
		out[i] = &tracepb.Span_Event{
			Name:                   e.Name,
			TimeUnixNano:           uint64(max(0, e.Time.UnixNano())),
			Attributes:             keyValues(e.Attributes),
			DroppedAttributesCount: clampUint32(e.DroppedAttributeCount),
		}
	}
	return out
}

func spanKind(k trace.SpanKind) tracepb.Span_SpanKind {
	switch k {
	case trace.SpanKindInternal:
		return tracepb.Span_SPAN_KIND_INTERNAL
	case trace.SpanKindClient:
		return tracepb.Span_SPAN_KIND_CLIENT
	case trace.SpanKindServer:
		return tracepb.Span_SPAN_KIND_SERVER
	case trace.SpanKindProducer:
		return tracepb.Span_SPAN_KIND_PRODUCER
	case trace.SpanKindConsumer:
		return tracepb.Span_SPAN_KIND_CONSUMER
	}
	return tracepb.Span_SPAN_KIND_UNSPECIFIED
}

func keyValues(kvs []attribute.KeyValue) []*commonpb.KeyValue {
	if len(kvs) == 0 {
		return nil
	}
	out := make([]*commonpb.KeyValue, 0, len(kvs))
	for _, kv := range kvs {
		out = append(out, &commonpb.KeyValue{Key: string(kv.Key), Value: value(kv.Value)})
	}
	return out
}

func iterKeyValues(it attribute.Iterator) []*commonpb.KeyValue {
	if it.Len() == 0 {
		return nil
	}
	out := make([]*commonpb.KeyValue, 0, it.Len())
	for it.Next() {
		kv := it.Attribute()
		out = append(out, &commonpb.KeyValue{Key: string(kv.Key), Value: value(kv.Value)})
	}
	return out
}

func value(v attribute.Value) *commonpb.AnyValue {
	av := &commonpb.AnyValue{}
	switch v.Type() {
	case attribute.BOOL:
		av.Value = &commonpb.AnyValue_BoolValue{BoolValue: v.AsBool()}
	case attribute.INT64:
		av.Value = &commonpb.AnyValue_IntValue{IntValue: v.AsInt64()}
	case attribute.FLOAT64:
		av.Value = &commonpb.AnyValue_DoubleValue{DoubleValue: v.AsFloat64()}
	case attribute.STRING:
		av.Value = &commonpb.AnyValue_StringValue{StringValue: v.AsString()}
	case attribute.BYTESLICE:
		av.Value = &commonpb.AnyValue_BytesValue{BytesValue: v.AsByteSlice()}
	case attribute.BOOLSLICE:
		av.Value = array(v.AsBoolSlice(), func(b bool) *commonpb.AnyValue {
			return &commonpb.AnyValue{Value: &commonpb.AnyValue_BoolValue{BoolValue: b}}
		})
	case attribute.INT64SLICE:
		av.Value = array(v.AsInt64Slice(), func(n int64) *commonpb.AnyValue {
			return &commonpb.AnyValue{Value: &commonpb.AnyValue_IntValue{IntValue: n}}
		})
	case attribute.FLOAT64SLICE:
		av.Value = array(v.AsFloat64Slice(), func(f float64) *commonpb.AnyValue {
			return &commonpb.AnyValue{Value: &commonpb.AnyValue_DoubleValue{DoubleValue: f}}
		})
	case attribute.STRINGSLICE:
		av.Value = array(v.AsStringSlice(), func(s string) *commonpb.AnyValue {
			return &commonpb.AnyValue{Value: &commonpb.AnyValue_StringValue{StringValue: s}}
		})
	case attribute.SLICE:
		av.Value = array(v.AsSlice(), value)
	case attribute.MAP:
		av.Value = &commonpb.AnyValue_KvlistValue{KvlistValue: &commonpb.KeyValueList{Values: keyValues(v.AsMap())}}
	case attribute.EMPTY:
	default:
		av.Value = &commonpb.AnyValue_StringValue{StringValue: "INVALID"}
	}
	return av
}

func array[T any](vs []T, f func(T) *commonpb.AnyValue) *commonpb.AnyValue_ArrayValue {
	out := make([]*commonpb.AnyValue, len(vs))
	for i, v := range vs {
		out[i] = f(v)
	}
	return &commonpb.AnyValue_ArrayValue{ArrayValue: &commonpb.ArrayValue{Values: out}}
}
