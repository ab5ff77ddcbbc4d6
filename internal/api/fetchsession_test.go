package api_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregor-project/gregor/internal/testutil"
)

// Fetch sessions (KIP-227) over raw connections at exact versions: v13+ name topics by id,
// v7-12 by name.

// sessionFetch is one fetch of a session test: the session id and epoch, the partitions
// named (topic -> partition -> fetch offset) and the partitions forgotten.
type sessionFetch struct {
	id, epoch int32
	maxWait   int32
	parts     map[string]map[int32]int64
	forget    map[string][]int32
}

// sessionConn sends session fetches at one version, naming topics by id from v13.
type sessionConn struct {
	*groupConn
	v   int16
	ids map[string][16]byte
}

func dialSessionConn(t *testing.T, addr string, v int16, topics ...string) *sessionConn {
	t.Helper()
	td, err := newAdmin(t, addr).ListTopics(ctxT(t), topics...)
	if err != nil {
		t.Fatal(err)
	}
	ids := map[string][16]byte{}
	for _, n := range topics {
		ids[n] = td[n].ID
	}
	return &sessionConn{groupConn: dialGroupConn(t, addr), v: v, ids: ids}
}

func (c *sessionConn) request(f sessionFetch) *kmsg.FetchRequest {
	req := kmsg.NewPtrFetchRequest()
	req.ReplicaID = -1
	req.MaxWaitMillis, req.MinBytes, req.MaxBytes = f.maxWait, 1, 1<<20
	req.SessionID, req.SessionEpoch = f.id, f.epoch
	for topic, ps := range f.parts {
		rt := kmsg.NewFetchRequestTopic()
		rt.Topic, rt.TopicID = topic, c.ids[topic]
		for p, off := range ps {
			rp := kmsg.NewFetchRequestTopicPartition()
			rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes = p, off, 1<<20
			rt.Partitions = append(rt.Partitions, rp)
		}
		req.Topics = append(req.Topics, rt)
	}
	for topic, ps := range f.forget {
		ft := kmsg.NewFetchRequestForgottenTopic()
		ft.Topic, ft.TopicID, ft.Partitions = topic, c.ids[topic], ps
		req.ForgottenTopics = append(req.ForgottenTopics, ft)
	}
	return req
}

func (c *sessionConn) fetch(f sessionFetch) *kmsg.FetchResponse {
	c.t.Helper()
	return c.do(c.request(f), c.v).(*kmsg.FetchResponse)
}

// answered lists the partitions of an answer as "topic/partition" -> the partition, naming
// topics by id from v13.
func (c *sessionConn) answered(resp *kmsg.FetchResponse) map[string]kmsg.FetchResponseTopicPartition {
	names := map[[16]byte]string{}
	for n, id := range c.ids {
		names[id] = n
	}
	out := map[string]kmsg.FetchResponseTopicPartition{}
	for _, t := range resp.Topics {
		name := t.Topic
		if c.v >= 13 {
			name = names[t.TopicID]
		}
		for _, p := range t.Partitions {
			out[fmt.Sprintf("%s/%d", name, p.Partition)] = p
		}
	}
	return out
}

// all names partitions 0..n-1 of topic at offset.
func all(topic string, n int, offset int64) map[string]map[int32]int64 {
	ps := map[int32]int64{}
	for i := range n {
		ps[int32(i)] = offset
	}
	return map[string]map[int32]int64{topic: ps}
}

func produceTo(t *testing.T, cl *kgo.Client, topic string, parts ...int32) {
	t.Helper()
	for _, p := range parts {
		produceSync(t, cl, &kgo.Record{Topic: topic, Partition: p, Value: []byte("v")})
	}
}

func manualClient(t *testing.T, addr string) *kgo.Client {
	return newClient(t, addr, kgo.RecordPartitioner(kgo.ManualPartitioner()))
}

// A full fetch with epoch 0 opens a session and is answered with its id and every partition;
// the next fetch (epoch 1) naming only changed partitions is answered with only the
// partitions that have something new: after max_wait, none; a record arriving while it is
// parked on all ten wakes it with that one partition.
func TestFetchSessionIncremental(t *testing.T) {
	for _, v := range []int16{12, 13, 17} {
		t.Run(fmt.Sprintf("v%d", v), func(t *testing.T) {
			b := testutil.StartBroker(t)
			createTopic(t, b.Addr(), "s", 10, nil)
			cl := manualClient(t, b.Addr())
			produceTo(t, cl, "s", 0, 1, 2, 3, 4, 5, 6, 7, 8, 9)
			c := dialSessionConn(t, b.Addr(), v, "s")

			resp := c.fetch(sessionFetch{epoch: 0, parts: all("s", 10, 0)})
			if resp.ErrorCode != 0 || resp.SessionID == 0 {
				t.Fatalf("full fetch: error %d, session %d", resp.ErrorCode, resp.SessionID)
			}
			id := resp.SessionID
			if got := c.answered(resp); len(got) != 10 || len(got["s/3"].RecordBatches) == 0 {
				t.Fatalf("full fetch answered %d partitions: %v", len(got), got)
			}

			// Every position moved to 1: nothing new, so the fetch waits out max_wait and is
			// answered with no partitions.
			start := time.Now()
			resp = c.fetch(sessionFetch{id: id, epoch: 1, maxWait: 300, parts: all("s", 10, 1)})
			if resp.ErrorCode != 0 || resp.SessionID != id || len(resp.Topics) != 0 {
				t.Fatalf("incremental, nothing new: error %d session %d topics %+v", resp.ErrorCode, resp.SessionID, resp.Topics)
			}
			if el := time.Since(start); el < 250*time.Millisecond {
				t.Fatalf("incremental with nothing new answered after %v, before max_wait", el)
			}

			// Parked on all ten (none named), woken by a record on partition 7.
			done := make(chan parkedFetch, 1)
			go func() {
				r, err := c.try(c.request(sessionFetch{id: id, epoch: 2, maxWait: 20000}), v)
				fr, _ := r.(*kmsg.FetchResponse)
				done <- parkedFetch{fr, err}
			}()
			select {
			case <-done:
				t.Fatal("incremental fetch answered before any record arrived")
			case <-time.After(200 * time.Millisecond): // a negative check window
			}
			produceTo(t, cl, "s", 7)
			var r parkedFetch
			select {
			case r = <-done:
			case <-time.After(10 * time.Second):
				t.Fatal("parked incremental fetch not woken")
			}
			if r.resp == nil {
				t.Fatal(r.err)
			}
			got := c.answered(r.resp)
			if p, ok := got["s/7"]; len(got) != 1 || !ok || p.HighWatermark != 2 || len(p.RecordBatches) == 0 {
				t.Fatalf("woken incremental answered %v, want only s/7 with its new record", got)
			}

			// The position of 7 is not named again: the session keeps 1, so the record is
			// read again (the client would name 2).
			resp = c.fetch(sessionFetch{id: id, epoch: 3, maxWait: 0})
			if got := c.answered(resp); len(got) != 1 || len(got["s/7"].RecordBatches) == 0 {
				t.Fatalf("session position of s/7: answered %v", got)
			}
			resp = c.fetch(sessionFetch{id: id, epoch: 4, maxWait: 100, parts: map[string]map[int32]int64{"s": {7: 2}}})
			if len(resp.Topics) != 0 || resp.ErrorCode != 0 {
				t.Fatalf("caught up: answered %v error %d", c.answered(resp), resp.ErrorCode)
			}
		})
	}
}

// Forgotten partitions leave the session: records on them no longer answer or wake it.
func TestFetchSessionForgottenTopics(t *testing.T) {
	b := testutil.StartBroker(t)
	createTopic(t, b.Addr(), "fa", 2, nil)
	createTopic(t, b.Addr(), "fb", 1, nil)
	cl := manualClient(t, b.Addr())
	c := dialSessionConn(t, b.Addr(), 13, "fa", "fb")
	parts := all("fa", 2, 0)
	parts["fb"] = map[int32]int64{0: 0}
	resp := c.fetch(sessionFetch{epoch: 0, parts: parts})
	if resp.SessionID == 0 || len(c.answered(resp)) != 3 {
		t.Fatalf("full fetch: session %d answered %v", resp.SessionID, c.answered(resp))
	}
	id := resp.SessionID
	resp = c.fetch(sessionFetch{id: id, epoch: 1, forget: map[string][]int32{"fb": {0}}})
	if resp.ErrorCode != 0 || len(resp.Topics) != 0 {
		t.Fatalf("forgetting: error %d answered %v", resp.ErrorCode, c.answered(resp))
	}
	produceTo(t, cl, "fb", 0)
	start := time.Now()
	resp = c.fetch(sessionFetch{id: id, epoch: 2, maxWait: 300})
	if len(resp.Topics) != 0 || time.Since(start) < 250*time.Millisecond {
		t.Fatalf("record on a forgotten partition answered %v after %v", c.answered(resp), time.Since(start))
	}
	produceTo(t, cl, "fa", 1)
	resp = c.fetch(sessionFetch{id: id, epoch: 3, maxWait: 5000})
	if got := c.answered(resp); len(got) != 1 || len(got["fa/1"].RecordBatches) == 0 {
		t.Fatalf("record on fa/1 answered %v", got)
	}
	// Forgetting every partition closes the session, and the fetch is answered sessionless.
	resp = c.fetch(sessionFetch{id: id, epoch: 4, forget: map[string][]int32{"fa": {0, 1}}})
	if resp.ErrorCode != 0 || resp.SessionID != 0 {
		t.Fatalf("emptied session: error %d session %d", resp.ErrorCode, resp.SessionID)
	}
	if resp = c.fetch(sessionFetch{id: id, epoch: 5}); resp.ErrorCode != kerr.FetchSessionIDNotFound.Code {
		t.Fatalf("fetch of the emptied session: error %d", resp.ErrorCode)
	}
}

// Session errors: an epoch other than the next is INVALID_FETCH_SESSION_EPOCH and changes
// nothing; an unknown id is FETCH_SESSION_ID_NOT_FOUND; a session opened by id (v13+)
// fetched by name is FETCH_SESSION_TOPIC_ID_ERROR. Each answers session id 0 and no
// partitions. Epoch -1 closes the session named and answers sessionless.
func TestFetchSessionErrors(t *testing.T) {
	b := testutil.StartBroker(t)
	createTopic(t, b.Addr(), "se", 2, nil)
	produceTo(t, manualClient(t, b.Addr()), "se", 0)
	c := dialSessionConn(t, b.Addr(), 13, "se")
	resp := c.fetch(sessionFetch{epoch: 0, parts: all("se", 2, 0)})
	id := resp.SessionID
	if id == 0 {
		t.Fatal("no session")
	}
	for _, bad := range []int32{2, 0 + 5, 1 << 30} {
		resp = c.fetch(sessionFetch{id: id, epoch: bad})
		if resp.ErrorCode != kerr.InvalidFetchSessionEpoch.Code || resp.SessionID != 0 || len(resp.Topics) != 0 {
			t.Fatalf("epoch %d: error %d session %d topics %d", bad, resp.ErrorCode, resp.SessionID, len(resp.Topics))
		}
	}
	resp = c.fetch(sessionFetch{id: id, epoch: 1, parts: all("se", 1, 1)})
	if resp.ErrorCode != 0 || resp.SessionID != id {
		t.Fatalf("right epoch after wrong ones: error %d session %d", resp.ErrorCode, resp.SessionID)
	}
	for _, unknown := range []int32{id + 1, -5, 1<<31 - 1} {
		resp = c.fetch(sessionFetch{id: unknown, epoch: 1})
		if resp.ErrorCode != kerr.FetchSessionIDNotFound.Code || resp.SessionID != 0 {
			t.Fatalf("unknown session %d: error %d session %d", unknown, resp.ErrorCode, resp.SessionID)
		}
	}
	byName := &sessionConn{groupConn: c.groupConn, v: 12, ids: c.ids}
	if resp = byName.fetch(sessionFetch{id: id, epoch: 2}); resp.ErrorCode != kerr.FetchSessionTopicIDError.Code {
		t.Fatalf("v12 fetch of a v13 session: error %d", resp.ErrorCode)
	}
	// Close with epoch -1: sessionless answer with every partition named.
	resp = c.fetch(sessionFetch{id: id, epoch: -1, parts: all("se", 2, 0)})
	if resp.ErrorCode != 0 || resp.SessionID != 0 || len(c.answered(resp)) != 2 {
		t.Fatalf("close: error %d session %d answered %v", resp.ErrorCode, resp.SessionID, c.answered(resp))
	}
	if resp = c.fetch(sessionFetch{id: id, epoch: 2}); resp.ErrorCode != kerr.FetchSessionIDNotFound.Code {
		t.Fatalf("closed session: error %d", resp.ErrorCode)
	}
	// Sessionless (0, -1) stays sessionless.
	if resp = c.fetch(sessionFetch{epoch: -1, parts: all("se", 2, 0)}); resp.SessionID != 0 || len(c.answered(resp)) != 2 {
		t.Fatalf("sessionless: session %d answered %v", resp.SessionID, c.answered(resp))
	}
}

// A full cache answers a new session's fetch sessionless (session id 0) with every
// partition. max.incremental.fetch.session.cache.slots is divided among 8 shards, as in
// Kafka: 8 slots hold one session per shard, and new sessions go to the shards in turn.
func TestFetchSessionCacheFull(t *testing.T) {
	b := testutil.StartBroker(t, "max.incremental.fetch.session.cache.slots=8")
	createTopic(t, b.Addr(), "cf", 3, nil)
	c := dialSessionConn(t, b.Addr(), 13, "cf")
	for i := range 8 {
		if resp := c.fetch(sessionFetch{epoch: 0, parts: all("cf", 3, 0)}); resp.SessionID == 0 {
			t.Fatalf("session %d not created", i)
		}
	}
	resp := c.fetch(sessionFetch{epoch: 0, parts: all("cf", 3, 0)})
	if resp.ErrorCode != 0 || resp.SessionID != 0 || len(c.answered(resp)) != 3 {
		t.Fatalf("ninth session: error %d session %d answered %v", resp.ErrorCode, resp.SessionID, c.answered(resp))
	}
	// A larger session outranks a smaller one only after the eviction time (120 s), so a
	// fetch of more partitions finds no room either.
	parts := all("cf", 3, 0)
	parts["cf"][3] = 0
	if resp = c.fetch(sessionFetch{epoch: 0, parts: parts}); resp.SessionID != 0 {
		t.Fatalf("session evicted before the eviction time: %d", resp.SessionID)
	}

	b0 := testutil.StartBroker(t, "max.incremental.fetch.session.cache.slots=0")
	createTopic(t, b0.Addr(), "cf", 1, nil)
	c0 := dialSessionConn(t, b0.Addr(), 13, "cf")
	if resp = c0.fetch(sessionFetch{epoch: 0, parts: all("cf", 1, 0)}); resp.SessionID != 0 || len(resp.Topics) != 1 {
		t.Fatalf("no slots: session %d topics %d", resp.SessionID, len(resp.Topics))
	}
}

// A franz-go consumer of many partitions (it opens a fetch session when the broker gives
// one) reads every record, in order per partition, while the broker answers it
// incrementally.
func TestFetchSessionFranzConsumer(t *testing.T) {
	b := testutil.StartBroker(t)
	const parts, rounds = 200, 5
	createTopic(t, b.Addr(), "fz", parts, nil)
	cl := manualClient(t, b.Addr())
	cons := newClient(t, b.Addr(), kgo.ConsumeTopics("fz"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxWait(200*time.Millisecond))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	next := map[int32]int64{}
	seen := 0
	for round := range rounds {
		// Each round writes to a few partitions only: the rest have nothing new.
		var rs []*kgo.Record
		for p := round; p < parts; p += 7 {
			rs = append(rs, &kgo.Record{Topic: "fz", Partition: int32(p), Value: fmt.Appendf(nil, "%d", round)})
		}
		produceSync(t, cl, rs...)
		want := seen + len(rs)
		for seen < want {
			fs := cons.PollFetches(ctx)
			if ctx.Err() != nil {
				t.Fatalf("round %d: consumed %d of %d records before timeout", round, seen, want)
			}
			for _, e := range fs.Errors() {
				t.Fatalf("fetch error: %v", e.Err)
			}
			for _, r := range fs.Records() {
				if r.Offset != next[r.Partition] {
					t.Fatalf("partition %d: offset %d, want %d", r.Partition, r.Offset, next[r.Partition])
				}
				next[r.Partition]++
				seen++
			}
		}
		if seen != want {
			t.Fatalf("round %d: %d records, want %d", round, seen, want)
		}
	}
	if n, ps := b.Handler().FetchSessions(); n != 1 || ps != parts {
		t.Fatalf("fetch sessions on the broker: %d of %d partitions, want the consumer's one of %d", n, ps, parts)
	}
}

// A partition answered with an error in the session's full fetch is answered again once the
// error clears, even with nothing new to read: the session remembers no high watermark for
// it (Kafka caches the error answer's -1).
func TestFetchSessionAnswersAPartitionWhoseErrorCleared(t *testing.T) {
	b := testutil.StartBroker(t)
	createTopic(t, b.Addr(), "e", 1, nil)
	produceTo(t, manualClient(t, b.Addr()), "e", 0)
	c := dialSessionConn(t, b.Addr(), 13, "e")

	resp := c.fetch(sessionFetch{epoch: 0, parts: all("e", 1, 100)})
	got := c.answered(resp)
	if resp.SessionID == 0 || got["e/0"].ErrorCode != kerr.OffsetOutOfRange.Code {
		t.Fatalf("full fetch past the end: session %d, answered %+v", resp.SessionID, got)
	}
	// The client resets to the end (1): no records, the same high watermark as before.
	resp = c.fetch(sessionFetch{id: resp.SessionID, epoch: 1, maxWait: 100, parts: all("e", 1, 1)})
	got = c.answered(resp)
	if p, ok := got["e/0"]; !ok || p.ErrorCode != 0 || p.HighWatermark != 1 {
		t.Fatalf("after the error cleared: answered %+v, want e/0 without error at high watermark 1", got)
	}
}
