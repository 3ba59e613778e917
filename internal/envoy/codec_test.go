package envoy

import (
	"bytes"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	rlv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

func codecRequestSeeds() []*rlsv3.RateLimitRequest {
	return []*rlsv3.RateLimitRequest{
		{Domain: "bench", Descriptors: []*rlv3.RateLimitDescriptor{{Entries: []*rlv3.RateLimitDescriptor_Entry{{Key: "k", Value: "v1"}}}}},
		{Domain: "d", HitsAddend: 7, Descriptors: []*rlv3.RateLimitDescriptor{
			{Entries: []*rlv3.RateLimitDescriptor_Entry{{Key: "a", Value: "b"}, {Key: "c"}}, HitsAddend: wrapperspb.UInt64(0), IsNegativeHits: true},
			{Limit: &rlv3.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: 5, Unit: typev3.RateLimitUnit_HOUR, UnitMultiplier: wrapperspb.UInt32(3)}},
			{},
		}},
	}
}

func codecResponseSeeds() []*rlsv3.RateLimitResponse {
	return []*rlsv3.RateLimitResponse{
		{OverallCode: rlsv3.RateLimitResponse_OK, Statuses: []*rlsv3.RateLimitResponse_DescriptorStatus{{Code: rlsv3.RateLimitResponse_OK}}},
		{OverallCode: rlsv3.RateLimitResponse_OVER_LIMIT,
			Statuses: []*rlsv3.RateLimitResponse_DescriptorStatus{
				{Code: rlsv3.RateLimitResponse_OVER_LIMIT, LimitRemaining: 0,
					CurrentLimit:       &rlsv3.RateLimitResponse_RateLimit{Name: "n", RequestsPerUnit: 10, Unit: rlsv3.RateLimitResponse_RateLimit_MINUTE, UnitMultiplier: wrapperspb.UInt32(5)},
					DurationUntilReset: &durationpb.Duration{Seconds: 30}},
				{Code: rlsv3.RateLimitResponse_OK, LimitRemaining: 4294967295, CurrentLimit: &rlsv3.RateLimitResponse_RateLimit{UnitMultiplier: &wrapperspb.UInt32Value{}},
					DurationUntilReset: &durationpb.Duration{Seconds: -1, Nanos: -5}},
			},
			ResponseHeadersToAdd: []*corev3.HeaderValue{{Key: "retry-after", Value: "30"}, {RawValue: []byte{0xff}}},
		},
	}
}

// FuzzRequestCodec checks the hand-written RateLimitRequest decoder
// against proto.Unmarshal on any bytes: both fail, or both succeed with
// equal messages (unknown fields discarded, which the decoder does).
func FuzzRequestCodec(f *testing.F) {
	for _, m := range codecRequestSeeds() {
		b, err := proto.Marshal(m)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
		f.Add(append(b, 0x12, 0x02, 0x0a, 0x00)) // a descriptor with one empty entry appended
	}
	f.Add([]byte{0x0a, 0x01, 0xff})                         // domain not UTF-8
	f.Add([]byte{0x08, 0x01, 0x18, 0x05, 0xa0, 0x06, 0x01}) // wrong wire type, unknown field
	f.Fuzz(func(t *testing.T, b []byte) {
		want := &rlsv3.RateLimitRequest{}
		wantErr := proto.UnmarshalOptions{DiscardUnknown: true}.Unmarshal(b, want)
		got := &rlsv3.RateLimitRequest{}
		gotErr := newCodec().Unmarshal(mem.BufferSlice{mem.SliceBuffer(b)}, got)
		if (wantErr == nil) != (gotErr == nil) {
			t.Fatalf("proto.Unmarshal: %v; codec: %v", wantErr, gotErr)
		}
		if wantErr == nil && !proto.Equal(want, got) {
			t.Fatalf("decoded differently:\nproto: %v\ncodec: %v", want, got)
		}
		fromBytes := &rlsv3.RateLimitRequest{}
		if err := newCodec().UnmarshalBytes(b, fromBytes); (err == nil) != (gotErr == nil) || err == nil && !proto.Equal(got, fromBytes) {
			t.Fatalf("UnmarshalBytes: %v, %v; Unmarshal: %v, %v", err, fromBytes, gotErr, got)
		}
	})
}

// FuzzResponseCodec checks the hand-written RateLimitResponse encoder
// against proto.Marshal: any response the fuzzer's bytes decode to (with
// name as a current limit's name, so strings that are not UTF-8 are tried)
// must encode to the same bytes, or fail as proto.Marshal does.
func FuzzResponseCodec(f *testing.F) {
	for _, m := range codecResponseSeeds() {
		b, err := proto.Marshal(m)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b, "")
		f.Add(b, "\xff")
	}
	f.Fuzz(func(t *testing.T, b []byte, name string) {
		m := &rlsv3.RateLimitResponse{}
		if err := (proto.UnmarshalOptions{DiscardUnknown: true}).Unmarshal(b, m); err != nil {
			return
		}
		for _, st := range m.Statuses {
			if st.CurrentLimit != nil && name != "" {
				st.CurrentLimit.Name = name
				break
			}
		}
		want, wantErr := proto.MarshalOptions{Deterministic: true}.Marshal(m)
		data, gotErr := newCodec().Marshal(m)
		if (wantErr == nil) != (gotErr == nil) {
			t.Fatalf("proto.Marshal: %v; codec: %v", wantErr, gotErr)
		}
		if wantErr != nil {
			return
		}
		got := data.Materialize()
		data.Free()
		if !bytes.Equal(want, got) {
			t.Fatalf("encoded differently (plain %v):\nproto: %x\ncodec: %x", plainResponse(m), want, got)
		}
		if appended, err := newCodec().AppendMarshal([]byte("prefix"), m); err != nil || !bytes.Equal(appended, append([]byte("prefix"), want...)) {
			t.Fatalf("AppendMarshal: %x, %v; want prefix then %x", appended, err, want)
		}
	})
}

// TestCodecOtherMessages: messages other than the two the codec handles
// by hand (the health service's, a request being sent) go to the
// registered proto codec, so they encode and decode as protobuf does.
func TestCodecOtherMessages(t *testing.T) {
	c := newCodec()
	for _, m := range []proto.Message{&healthpb.HealthCheckRequest{Service: "ratelimit"}, codecRequestSeeds()[1]} {
		data, err := c.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		want, _ := proto.Marshal(m)
		if got := data.Materialize(); !bytes.Equal(got, want) {
			t.Errorf("%T encoded as %x, proto.Marshal gives %x", m, got, want)
		}
		back := m.ProtoReflect().New().Interface()
		if err := c.Unmarshal(data, back); err != nil || !proto.Equal(back, m) {
			t.Errorf("%T decoded as %v (%v), want %v", m, back, err, m)
		}
		data.Free()
	}
}

// BenchmarkCodec compares the hand-written request decoding and response
// encoding with protobuf's.
func BenchmarkCodec(b *testing.B) {
	req, _ := proto.Marshal(codecRequestSeeds()[0])
	resp := codecResponseSeeds()[1]
	c := newCodec()
	b.Run("unmarshal/codec", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if err := c.Unmarshal(mem.BufferSlice{mem.SliceBuffer(req)}, &rlsv3.RateLimitRequest{}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("unmarshal/proto", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if err := c.fallback.Unmarshal(mem.BufferSlice{mem.SliceBuffer(req)}, &rlsv3.RateLimitRequest{}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("marshal/codec", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			d, err := c.Marshal(resp)
			if err != nil {
				b.Fatal(err)
			}
			d.Free()
		}
	})
	b.Run("marshal/proto", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			d, err := c.fallback.Marshal(resp)
			if err != nil {
				b.Fatal(err)
			}
			d.Free()
		}
	})
}
