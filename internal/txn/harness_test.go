package txn

import (
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// harness drives a Shard with a fake clock: writes are "appended" to log (or failed with
// failing), marker attempts are collected in jobs until the test answers them, fresh
// producer ids come from nextPID, and replies are collected by waiter.
type harness struct {
	t       *testing.T
	s       *Shard
	now     int64
	seq     int
	log     []Record
	failing error
	jobs    []MarkerJob
	replies map[Waiter]any
	nextPID int64
	warns   []error
}

func testConfig() Config {
	return Config{MaxTimeoutMs: 60_000, AbortTimedOutIntervalMs: 1000, IDExpirationMs: 100_000, RemoveExpiredIntervalMs: 10_000}
}

func newHarness(t *testing.T) *harness {
	h := &harness{t: t, now: 1_000_000, replies: map[Waiter]any{}, nextPID: 1000}
	h.s = NewShard(testConfig(), 7)
	h.run(h.s.LoadComplete(h.now))
	return h
}

// reload replaces the shard with one rebuilt from the log, as a new coordinator (in epoch)
// loads the partition; marker attempts of the old one are forgotten.
func (h *harness) reload(epoch int32) {
	h.t.Helper()
	h.s = NewShard(testConfig(), epoch)
	for _, r := range h.log {
		if err := h.s.Replay(r.Key, r.Value); err != nil {
			h.t.Fatal(err)
		}
	}
	h.jobs = nil
	h.run(h.s.LoadComplete(h.now))
}

func (h *harness) run(r Ready) {
	h.t.Helper()
	if r.NeedProducerID {
		h.t.Fatal("unexpected NeedProducerID")
	}
	for len(r.Writes) > 0 {
		w := r.Writes[0]
		r.Writes = r.Writes[1:]
		err := h.failing
		if err == nil {
			h.log = append(h.log, w.Records...)
		}
		next := h.s.Written(h.now, w.ID, err)
		r.Replies = append(r.Replies, next.Replies...)
		r.Writes = append(r.Writes, next.Writes...)
		r.Markers = append(r.Markers, next.Markers...)
		r.Warnings = append(r.Warnings, next.Warnings...)
	}
	h.jobs = append(h.jobs, r.Markers...)
	h.warns = append(h.warns, r.Warnings...)
	for _, rep := range r.Replies {
		if _, dup := h.replies[rep.To]; dup {
			h.t.Fatalf("waiter %v answered twice", rep.To)
		}
		h.replies[rep.To] = rep.Msg
	}
}

func (h *harness) waiter(what string) Waiter {
	h.seq++
	return fmt.Sprintf("%s#%d", what, h.seq)
}

func (h *harness) advance(ms int64) {
	h.t.Helper()
	h.now += ms
	h.run(h.s.Tick(h.now))
}

// withFresh runs a request, giving it a fresh producer id if it asks for one.
func (h *harness) withFresh(in func(fresh int64) Ready) {
	h.t.Helper()
	r := in(-1)
	if r.NeedProducerID {
		h.nextPID++
		r = in(h.nextPID)
	}
	h.run(r)
}

func initReq(id string, timeoutMs int32, version int16) *kmsg.InitProducerIDRequest {
	r := kmsg.NewPtrInitProducerIDRequest()
	r.Version, r.TransactionalID, r.TransactionTimeoutMillis = version, &id, timeoutMs
	r.ProducerID, r.ProducerEpoch = -1, -1
	return r
}

func (h *harness) initReq(req *kmsg.InitProducerIDRequest) *kmsg.InitProducerIDResponse {
	h.t.Helper()
	w := h.waiter("init")
	h.withFresh(func(fresh int64) Ready { return h.s.InitProducerID(h.now, w, req, fresh) })
	r, ok := h.replies[w].(*kmsg.InitProducerIDResponse)
	if !ok {
		h.t.Fatalf("InitProducerId not answered: %v", h.replies[w])
	}
	return r
}

// init is InitProducerId v4 without a producer id, timeout 10 s.
func (h *harness) init(id string) *kmsg.InitProducerIDResponse {
	h.t.Helper()
	return h.initReq(initReq(id, 10_000, 4))
}

// initOK inits id and returns its producer id and epoch, failing on an error.
func (h *harness) initOK(id string) (int64, int16) {
	h.t.Helper()
	r := h.init(id)
	if r.ErrorCode != 0 {
		h.t.Fatalf("InitProducerId %s: %v", id, kerr.ErrorForCode(r.ErrorCode))
	}
	return r.ProducerID, r.ProducerEpoch
}

func tp(topic string, p int32) TopicPartition { return TopicPartition{topic, p} }

func (h *harness) add(id string, pid int64, epoch int16, parts ...TopicPartition) *kerr.Error {
	h.t.Helper()
	w := h.waiter("add")
	h.run(h.s.AddPartitions(h.now, w, id, pid, epoch, parts, false))
	msg, ok := h.replies[w]
	if !ok {
		h.t.Fatal("AddPartitions not answered")
	}
	return msg.(*kerr.Error)
}

func (h *harness) end(id string, pid int64, epoch int16, commit bool, version int16) *kmsg.EndTxnResponse {
	h.t.Helper()
	req := kmsg.NewPtrEndTxnRequest()
	req.Version, req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Commit = version, id, pid, epoch, commit
	w := h.waiter("end")
	h.withFresh(func(fresh int64) Ready { return h.s.EndTxn(h.now, w, req, fresh) })
	r, ok := h.replies[w].(*kmsg.EndTxnResponse)
	if !ok {
		h.t.Fatal("EndTxn not answered")
	}
	return r
}

// answerMarkers answers every marker attempt sent so far: the partitions in failed fail with
// their error, the others are written.
func (h *harness) answerMarkers(failed map[TopicPartition]error) []MarkerJob {
	h.t.Helper()
	jobs := h.jobs
	h.jobs = nil
	for _, j := range jobs {
		f := map[TopicPartition]error{}
		for _, p := range j.Partitions {
			if err, ok := failed[p]; ok {
				f[p] = err
			}
		}
		h.run(h.s.MarkersWritten(h.now, j.ID, f))
	}
	return jobs
}

func (h *harness) state(id string) State {
	h.t.Helper()
	t := h.s.Txn(id)
	if t == nil {
		h.t.Fatalf("%s unknown", id)
	}
	return t.State
}

func wantCode(t *testing.T, what string, got int16, want *kerr.Error) {
	t.Helper()
	if got != code(want) {
		t.Fatalf("%s: got %v, want %v", what, kerr.ErrorForCode(got), want)
	}
}

func wantErr(t *testing.T, what string, got, want *kerr.Error) {
	t.Helper()
	if got != want {
		t.Fatalf("%s: got %v, want %v", what, got, want)
	}
}

// lastValue decodes the last record of the log for id (nil: a tombstone).
func (h *harness) lastValue(id string) *kmsg.TxnMetadataValue {
	h.t.Helper()
	for i := len(h.log) - 1; i >= 0; i-- {
		got, err := decodeKey(h.log[i].Key)
		if err != nil {
			h.t.Fatal(err)
		}
		if got != id {
			continue
		}
		if h.log[i].Value == nil {
			return nil
		}
		var v kmsg.TxnMetadataValue
		if err := v.ReadFrom(h.log[i].Value); err != nil {
			h.t.Fatal(err)
		}
		return &v
	}
	h.t.Fatalf("no record of %s", id)
	return nil
}
