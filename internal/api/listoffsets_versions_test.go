package api_test

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregor-project/gregor/internal/testutil"
	"github.com/gregor-project/gregor/internal/wire"
)

// The special ListOffsets timestamps are accepted from the version that introduced them, as
// Kafka's ReplicaManager.fetchOffset checks: -3 (max timestamp) from v7, -4 (earliest local)
// from v8, -5 (latest tiered) from v9; below it, and for any other negative timestamp, the
// partition's answer is UNSUPPORTED_VERSION. v0's legacy lookup answers them with no offsets.
// A partition named twice (v1+) is answered once, INVALID_REQUEST.
func TestListOffsetsSpecialTimestampVersions(t *testing.T) {
	b := testutil.StartBroker(t)
	createTopic(t, b.Addr(), "special", 1, nil)
	cl := newClient(t, b.Addr())
	produceSync(t, cl,
		&kgo.Record{Topic: "special", Value: []byte("a"), Timestamp: time.UnixMilli(5000)},
		&kgo.Record{Topic: "special", Value: []byte("b"), Timestamp: time.UnixMilli(9000)},
		&kgo.Record{Topic: "special", Value: []byte("c"), Timestamp: time.UnixMilli(7000)},
	)
	conn, err := wire.Dial(ctxT(t), b.Addr(), "test")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	ask := func(version int16, ts ...int64) []kmsg.ListOffsetsResponseTopicPartition {
		t.Helper()
		req := kmsg.NewPtrListOffsetsRequest()
		req.SetVersion(version)
		req.ReplicaID = -1
		rt := kmsg.NewListOffsetsRequestTopic()
		rt.Topic = "special"
		for _, x := range ts {
			rp := kmsg.NewListOffsetsRequestTopicPartition()
			rp.Timestamp, rp.CurrentLeaderEpoch, rp.MaxNumOffsets = x, -1, 1
			rt.Partitions = append(rt.Partitions, rp)
		}
		req.Topics = append(req.Topics, rt)
		resp, err := conn.Request(ctxT(t), req)
		if err != nil {
			t.Fatalf("ListOffsets v%d: %v", version, err)
		}
		return resp.(*kmsg.ListOffsetsResponse).Topics[0].Partitions
	}
	type want struct {
		code   *kerr.Error // nil: no error
		offset int64
	}
	supported := map[int64]want{
		-1: {nil, 3},
		-2: {nil, 0},
		-3: {nil, 1}, // the record of timestamp 9000
		-4: {nil, 0},
		-5: {nil, -1}, // nothing is tiered
	}
	since := map[int64]int16{-1: 1, -2: 1, -3: 7, -4: 8, -5: 9}
	for v := int16(1); v <= 9; v++ {
		for _, ts := range []int64{-1, -2, -3, -4, -5, -6, -100} {
			p := ask(v, ts)[0]
			w, known := supported[ts]
			if !known || v < since[ts] {
				w = want{kerr.UnsupportedVersion, -1}
			}
			wantCode := int16(0)
			if w.code != nil {
				wantCode = w.code.Code
			}
			if p.ErrorCode != wantCode || (wantCode == 0 && p.Offset != w.offset) {
				t.Errorf("v%d timestamp %d: %v offset %d, want %v offset %d", v, ts, kerr.ErrorForCode(p.ErrorCode), p.Offset, w.code, w.offset)
			}
		}
	}
	for _, ts := range []int64{-3, -4, -5} {
		if p := ask(0, ts)[0]; p.ErrorCode != 0 || len(p.OldStyleOffsets) != 0 {
			t.Errorf("v0 timestamp %d: %v offsets %v, want none", ts, kerr.ErrorForCode(p.ErrorCode), p.OldStyleOffsets)
		}
	}
	if p := ask(0, -1)[0]; p.ErrorCode != 0 || len(p.OldStyleOffsets) != 1 || p.OldStyleOffsets[0] != 3 {
		t.Errorf("v0 latest: %v offsets %v, want [3]", kerr.ErrorForCode(p.ErrorCode), p.OldStyleOffsets)
	}
	for _, v := range []int16{1, 9} {
		ps := ask(v, -1, -2)
		if len(ps) != 1 || ps[0].ErrorCode != kerr.InvalidRequest.Code {
			t.Errorf("v%d partition named twice: %d answers, first %v; want one INVALID_REQUEST", v, len(ps), kerr.ErrorForCode(ps[0].ErrorCode))
		}
	}
}
