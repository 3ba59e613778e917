package envoy

import (
	"errors"
	"slices"
	"unicode/utf8"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	rlv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/grpc/encoding"
	grpcproto "google.golang.org/grpc/encoding/proto"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// codec is the server's gRPC codec: it decodes a RateLimitRequest and
// encodes a RateLimitResponse with protowire by hand, without the
// reflection google.golang.org/protobuf's Marshal and Unmarshal go
// through, and passes every other message (health, reflection) to the
// registered proto codec. It is installed on this package's server only
// (grpc.ForceServerCodecV2), never registered globally.
//
// Both directions are byte-for-byte what proto.Marshal and proto.Unmarshal
// give (FuzzCodec checks it), with two documented differences: fields the
// request's schema does not know are skipped rather than kept (nothing
// reads them), and a response must not carry unknown fields (the service
// builds every response from scratch).
type codec struct{ fallback encoding.CodecV2 }

func newCodec() codec { return codec{fallback: encoding.GetCodecV2(grpcproto.Name)} }

// Name is "proto": the codec speaks the proto content subtype.
func (codec) Name() string { return grpcproto.Name }

func (c codec) Marshal(v any) (mem.BufferSlice, error) {
	resp, ok := v.(*rlsv3.RateLimitResponse)
	if !ok || !plainResponse(resp) {
		return c.fallback.Marshal(v)
	}
	size := responseSize(resp)
	pool := mem.DefaultBufferPool()
	buf := pool.Get(size)
	out, err := appendResponse((*buf)[:0], resp)
	if err != nil {
		pool.Put(buf)
		return nil, err
	}
	*buf = out
	return mem.BufferSlice{mem.NewBuffer(buf, pool)}, nil
}

func (c codec) Unmarshal(data mem.BufferSlice, v any) error {
	req, ok := v.(*rlsv3.RateLimitRequest)
	if !ok {
		return c.fallback.Unmarshal(data, v)
	}
	buf := data.MaterializeToBuffer(mem.DefaultBufferPool())
	defer buf.Free()
	return unmarshalRequest(buf.ReadOnlyData(), req)
}

// UnmarshalBytes is Unmarshal from a plain slice (h2grpc.BytesCodec).
func (c codec) UnmarshalBytes(data []byte, v any) error {
	if req, ok := v.(*rlsv3.RateLimitRequest); ok {
		return unmarshalRequest(data, req)
	}
	return c.fallback.Unmarshal(mem.BufferSlice{mem.SliceBuffer(data)}, v)
}

// AppendMarshal is Marshal appending to b (h2grpc.BytesCodec).
func (c codec) AppendMarshal(b []byte, v any) ([]byte, error) {
	if resp, ok := v.(*rlsv3.RateLimitResponse); ok && plainResponse(resp) {
		return appendResponse(slices.Grow(b, responseSize(resp)), resp)
	}
	msg, err := c.fallback.Marshal(v)
	if err != nil {
		return nil, err
	}
	for _, buf := range msg {
		b = append(b, buf.ReadOnlyData()...)
	}
	msg.Free()
	return b, nil
}

// Errors of the hand-written codec, in protobuf's words.
var (
	errInvalidUTF8 = errors.New("proto: string field contains invalid UTF-8")
	errTruncated   = errors.New("proto: cannot parse invalid wire-format data")
)

// field reads one field's tag and value from b. For a varint it returns
// the value in v; for a length-delimited field the bytes in data. n is
// the bytes consumed; an error means b is malformed.
func field(b []byte) (num protowire.Number, typ protowire.Type, v uint64, data []byte, n int, err error) {
	num, typ, tn := protowire.ConsumeTag(b)
	if tn < 0 || num > protowire.MaxValidNumber {
		return 0, 0, 0, nil, 0, errTruncated
	}
	var vn int
	switch typ {
	case protowire.VarintType:
		v, vn = protowire.ConsumeVarint(b[tn:])
	case protowire.BytesType:
		data, vn = protowire.ConsumeBytes(b[tn:])
	default:
		vn = protowire.ConsumeFieldValue(num, typ, b[tn:])
	}
	if vn < 0 {
		return 0, 0, 0, nil, 0, errTruncated
	}
	return num, typ, v, data, tn + vn, nil
}

// walk calls f for every field of the message in b, stopping at the first
// error. A field whose wire type does not match its number's is f's to
// skip (as an unknown field).
func walk(b []byte, f func(num protowire.Number, typ protowire.Type, v uint64, data []byte) error) error {
	for len(b) > 0 {
		num, typ, v, data, n, err := field(b)
		if err != nil {
			return err
		}
		if err := f(num, typ, v, data); err != nil {
			return err
		}
		b = b[n:]
	}
	return nil
}

func utf8String(data []byte) (string, error) {
	if !utf8.Valid(data) {
		return "", errInvalidUTF8
	}
	return string(data), nil
}

// unmarshalRequest merges the RateLimitRequest in b into m, as
// proto.Unmarshal does (a repeated field appends, a scalar's last value
// wins, a message field seen twice is merged).
func unmarshalRequest(b []byte, m *rlsv3.RateLimitRequest) error {
	return walk(b, func(num protowire.Number, typ protowire.Type, v uint64, data []byte) (err error) {
		switch {
		case num == 1 && typ == protowire.BytesType:
			m.Domain, err = utf8String(data)
		case num == 2 && typ == protowire.BytesType:
			d := &rlv3.RateLimitDescriptor{}
			m.Descriptors = append(m.Descriptors, d)
			err = unmarshalDescriptor(data, d)
		case num == 3 && typ == protowire.VarintType:
			m.HitsAddend = uint32(v)
		}
		return err
	})
}

func unmarshalDescriptor(b []byte, m *rlv3.RateLimitDescriptor) error {
	return walk(b, func(num protowire.Number, typ protowire.Type, v uint64, data []byte) error {
		switch {
		case num == 1 && typ == protowire.BytesType:
			e := &rlv3.RateLimitDescriptor_Entry{}
			m.Entries = append(m.Entries, e)
			return unmarshalEntry(data, e)
		case num == 2 && typ == protowire.BytesType:
			if m.Limit == nil {
				m.Limit = &rlv3.RateLimitDescriptor_RateLimitOverride{}
			}
			return unmarshalOverride(data, m.Limit)
		case num == 3 && typ == protowire.BytesType:
			if m.HitsAddend == nil {
				m.HitsAddend = &wrapperspb.UInt64Value{}
			}
			return walk(data, func(num protowire.Number, typ protowire.Type, v uint64, _ []byte) error {
				if num == 1 && typ == protowire.VarintType {
					m.HitsAddend.Value = v
				}
				return nil
			})
		case num == 4 && typ == protowire.VarintType:
			m.IsNegativeHits = protowire.DecodeBool(v)
		}
		return nil
	})
}

func unmarshalEntry(b []byte, m *rlv3.RateLimitDescriptor_Entry) error {
	return walk(b, func(num protowire.Number, typ protowire.Type, _ uint64, data []byte) (err error) {
		switch {
		case num == 1 && typ == protowire.BytesType:
			m.Key, err = utf8String(data)
		case num == 2 && typ == protowire.BytesType:
			m.Value, err = utf8String(data)
		}
		return err
	})
}

func unmarshalOverride(b []byte, m *rlv3.RateLimitDescriptor_RateLimitOverride) error {
	return walk(b, func(num protowire.Number, typ protowire.Type, v uint64, data []byte) error {
		switch {
		case num == 1 && typ == protowire.VarintType:
			m.RequestsPerUnit = uint32(v)
		case num == 2 && typ == protowire.VarintType:
			m.Unit = typev3.RateLimitUnit(int32(v))
		case num == 3 && typ == protowire.BytesType:
			if m.UnitMultiplier == nil {
				m.UnitMultiplier = &wrapperspb.UInt32Value{}
			}
			return walk(data, func(num protowire.Number, typ protowire.Type, v uint64, _ []byte) error {
				if num == 1 && typ == protowire.VarintType {
					m.UnitMultiplier.Value = uint32(v)
				}
				return nil
			})
		}
		return nil
	})
}

// plainResponse reports whether resp uses only the fields the service
// sets (appendResponse writes those; anything else goes to proto.Marshal).
func plainResponse(resp *rlsv3.RateLimitResponse) bool {
	if resp == nil || len(resp.RequestHeadersToAdd) > 0 || len(resp.RawBody) > 0 || resp.DynamicMetadata != nil || resp.Quota != nil {
		return false
	}
	for _, st := range resp.Statuses {
		if st == nil || st.Quota != nil {
			return false
		}
	}
	for _, h := range resp.ResponseHeadersToAdd {
		if h == nil {
			return false
		}
	}
	return true
}

// The sizes below are the encoded lengths of each message's fields, as
// proto3 writes them: a scalar only when it is not zero, a message field
// when it is set.

func varintField(v uint64) int { return 1 + protowire.SizeVarint(v) } // field numbers here all fit one tag byte
func bytesField(n int) int     { return 1 + protowire.SizeBytes(n) }

func optVarint(v uint64) int {
	if v == 0 {
		return 0
	}
	return varintField(v)
}

func optString(s string) int {
	if s == "" {
		return 0
	}
	return bytesField(len(s))
}

func responseSize(m *rlsv3.RateLimitResponse) int {
	n := optVarint(uint64(m.OverallCode))
	for _, st := range m.Statuses {
		n += bytesField(statusSize(st))
	}
	for _, h := range m.ResponseHeadersToAdd {
		n += bytesField(headerSize(h))
	}
	return n
}

func statusSize(m *rlsv3.RateLimitResponse_DescriptorStatus) int {
	n := optVarint(uint64(m.Code)) + optVarint(uint64(m.LimitRemaining))
	if m.CurrentLimit != nil {
		n += bytesField(limitSize(m.CurrentLimit))
	}
	if m.DurationUntilReset != nil {
		n += bytesField(durationSize(m.DurationUntilReset))
	}
	return n
}

func limitSize(m *rlsv3.RateLimitResponse_RateLimit) int {
	n := optVarint(uint64(m.RequestsPerUnit)) + optVarint(uint64(m.Unit)) + optString(m.Name)
	if m.UnitMultiplier != nil {
		n += bytesField(optVarint(uint64(m.UnitMultiplier.Value)))
	}
	return n
}

func durationSize(m *durationpb.Duration) int {
	// Negative numbers are sign-extended to ten bytes, as proto3 writes
	// int64 and int32.
	return optVarint(uint64(m.Seconds)) + optVarint(uint64(int64(m.Nanos)))
}

func headerSize(m *corev3.HeaderValue) int {
	return optString(m.Key) + optString(m.Value) + optString(string(m.RawValue))
}

func appendVarintField(b []byte, num protowire.Number, v uint64) []byte {
	if v == 0 {
		return b
	}
	return protowire.AppendVarint(protowire.AppendTag(b, num, protowire.VarintType), v)
}

func appendStringField(b []byte, num protowire.Number, s string) ([]byte, error) {
	if s == "" {
		return b, nil
	}
	if !utf8.ValidString(s) {
		return nil, errInvalidUTF8
	}
	return protowire.AppendString(protowire.AppendTag(b, num, protowire.BytesType), s), nil
}

func appendLength(b []byte, num protowire.Number, n int) []byte {
	return protowire.AppendVarint(protowire.AppendTag(b, num, protowire.BytesType), uint64(n))
}

// appendResponse appends resp's encoding to b, fields in number order, as
// proto.Marshal writes them.
func appendResponse(b []byte, m *rlsv3.RateLimitResponse) ([]byte, error) {
	var err error
	b = appendVarintField(b, 1, uint64(m.OverallCode))
	for _, st := range m.Statuses {
		b = appendLength(b, 2, statusSize(st))
		if b, err = appendStatus(b, st); err != nil {
			return nil, err
		}
	}
	for _, h := range m.ResponseHeadersToAdd {
		b = appendLength(b, 3, headerSize(h))
		if b, err = appendStringField(b, 1, h.Key); err != nil {
			return nil, err
		}
		if b, err = appendStringField(b, 2, h.Value); err != nil {
			return nil, err
		}
		if len(h.RawValue) > 0 {
			b = protowire.AppendBytes(protowire.AppendTag(b, 3, protowire.BytesType), h.RawValue)
		}
	}
	return b, nil
}

func appendStatus(b []byte, m *rlsv3.RateLimitResponse_DescriptorStatus) ([]byte, error) {
	var err error
	b = appendVarintField(b, 1, uint64(m.Code))
	if l := m.CurrentLimit; l != nil {
		b = appendLength(b, 2, limitSize(l))
		b = appendVarintField(b, 1, uint64(l.RequestsPerUnit))
		b = appendVarintField(b, 2, uint64(l.Unit))
		if b, err = appendStringField(b, 3, l.Name); err != nil {
			return nil, err
		}
		if l.UnitMultiplier != nil {
			b = appendLength(b, 4, optVarint(uint64(l.UnitMultiplier.Value)))
			b = appendVarintField(b, 1, uint64(l.UnitMultiplier.Value))
		}
	}
	b = appendVarintField(b, 3, uint64(m.LimitRemaining))
	if d := m.DurationUntilReset; d != nil {
		b = appendLength(b, 4, durationSize(d))
		b = appendVarintField(b, 1, uint64(d.Seconds))
		b = appendVarintField(b, 2, uint64(int64(d.Nanos)))
	}
	return b, nil
}
