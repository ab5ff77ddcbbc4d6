package replica

import (
	"errors"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/gregor-project/gregor/internal/batch"
	"github.com/gregor-project/gregor/internal/storage"
)

// Both ways of finding the divergence point.
var truncationModes = []struct {
	name string
	cfg  FollowerConfig
}{
	{"diverging epoch on fetch", FollowerConfig{BackoffMs: 100}},
	{"OffsetForLeaderEpoch", FollowerConfig{BackoffMs: 100, UseOffsetForLeaderEpoch: true}},
}

func pair(t *testing.T, cfg FollowerConfig) (a, b *replicaNode) {
	a, b = newNode(t, 1), newNode(t, 2)
	a.fcfg, b.fcfg = cfg, cfg
	return a, b
}

func regAB(leader int32, epoch int32, isr ...int32) Registration {
	return Registration{Leader: leader, LeaderEpoch: epoch, PartitionEpoch: epoch, Replicas: []int32{1, 2}, ISR: isr}
}

// KIP-101 scenario 1: the follower restarts after receiving a batch but before learning the
// high watermark that covers it; then the leader dies. The follower must not truncate to its
// stale high watermark on restart: the acknowledged batch survives on the new leader, and the
// old leader, returning, finds no divergence.
func TestFollowerKIP101RestartBeforeHighWatermark(t *testing.T) {
	for _, mode := range truncationModes {
		t.Run(mode.name, func(t *testing.T) {
			a, b := pair(t, mode.cfg)
			now := int64(1_000_000)
			a.lead(regAB(1, 1, 1, 2), now)
			b.follow(1, 1)

			a.produce(now, "m1")
			a.leader.AddWaiter(ProduceWaiter{RequiredOffset: 1, MinISR: 2, DeadlineMs: now + 30_000, Token: "m1"})
			b.catchUp(a, now)
			if a.hw != 1 || b.hw != 1 {
				t.Fatalf("hw %d/%d", a.hw, b.hw)
			}
			a.produce(now, "m2")
			a.leader.AddWaiter(ProduceWaiter{RequiredOffset: 2, MinISR: 2, DeadlineMs: now + 30_000, Token: "m2"})
			// B fetches m2 ...
			for b.log.LogEndOffset() < 2 {
				b.fetchRound(a, now)
			}
			// ... and its next fetch moves the leader's high watermark (acknowledging m2), but
			// B restarts before it sees the answer.
			req := b.follower.Next(b.local(), now)
			serveFetch(a, 2, req, now)
			if a.hw != 2 || b.hw != 1 {
				t.Fatalf("hw %d/%d", a.hw, b.hw)
			}
			if err, ok := a.answers["m2"]; !ok || err != nil {
				t.Fatalf("m2 not acknowledged: %v", a.answers)
			}
			b.restart()
			b.follow(1, 1)
			if b.log.LogEndOffset() != 2 {
				t.Fatalf("the follower truncated on restart: log end offset %d", b.log.LogEndOffset())
			}

			// A dies; the controller elects B from the ISR.
			a.restart()
			b.lead(regAB(2, 2, 2), now)
			if got := values(t, b.log); !slices.Equal(got, []string{"0:1:m1", "1:1:m2"}) {
				t.Fatalf("new leader's log %v", got)
			}
			b.produce(now, "m3")

			// A comes back as a follower of B: nothing to truncate, it catches up.
			a.follow(2, 2)
			a.catchUp(b, now)
			if got := values(t, a.log); !slices.Equal(got, []string{"0:1:m1", "1:1:m2", "2:2:m3"}) {
				t.Fatalf("returning leader's log %v", got)
			}
			sameBelow(t, b.log.LogEndOffset(), a, b)
			if !slices.Equal(a.epochs.Entries(), b.epochs.Entries()) {
				t.Fatalf("epoch caches differ: %v %v", a.epochs.Entries(), b.epochs.Entries())
			}
		})
	}
}

// KIP-101 scenario 2 (and KIP-320): the old leader wrote a batch no follower got, died, and
// the new leader wrote different records at the same offset. Returning, the old leader
// truncates its unreplicated batch and takes the new leader's records: no divergence.
func TestFollowerReturningOldLeaderTruncates(t *testing.T) {
	for _, mode := range truncationModes {
		t.Run(mode.name, func(t *testing.T) {
			a, b := pair(t, mode.cfg)
			now := int64(1_000_000)
			a.lead(regAB(1, 1, 1, 2), now)
			b.follow(1, 1)
			a.produce(now, "m1")
			b.catchUp(a, now)
			a.produce(now, "m2-lost", "m2b-lost") // acks=1: never replicated
			a.restart()                           // A dies

			b.lead(regAB(2, 2, 2), now)
			b.produce(now, "m3")
			b.produce(now, "m4", "m5")

			a.follow(2, 2)
			a.catchUp(b, now)
			want := []string{"0:1:m1", "1:2:m3", "2:2:m4", "3:2:m5"}
			if got := values(t, a.log); !slices.Equal(got, want) {
				t.Fatalf("old leader's log %v, want %v", got, want)
			}
			sameBelow(t, b.log.LogEndOffset(), a, b)
			if !slices.Equal(a.epochs.Entries(), b.epochs.Entries()) {
				t.Fatalf("epoch caches differ: %v %v", a.epochs.Entries(), b.epochs.Entries())
			}
		})
	}
}

// KIP-279: quick leader changes leave the follower with epochs the leader never had; it
// needs several rounds, each cutting at the end of its largest epoch the leader may know.
func TestFollowerKIP279MultipleRounds(t *testing.T) {
	for _, mode := range truncationModes {
		t.Run(mode.name, func(t *testing.T) {
			l, f := pair(t, mode.cfg)
			now := int64(1_000_000)
			// Leader: epoch 1 [0,2), epoch 3 [2,5), epoch 5 [5,7).
			// Follower: epoch 1 [0,2), epoch 2 [2,4), epoch 4 [4,6).
			writeEpochs(t, l, []int32{1, 1, 3, 3, 3, 5, 5})
			writeEpochs(t, f, []int32{1, 1, 2, 2, 4, 4})
			l.hw, f.hw = 2, 2
			l.lead(Registration{Leader: 1, LeaderEpoch: 6, PartitionEpoch: 1, Replicas: []int32{1, 2}, ISR: []int32{1}}, now)
			f.follow(1, 6)
			var rounds []RequestKind
			for range 10 {
				rounds = append(rounds, f.fetchRound(l, now))
				if f.log.LogEndOffset() == l.log.LogEndOffset() {
					break
				}
			}
			want := []string{"0:1:v0", "1:1:v1", "2:3:v2", "3:3:v3", "4:3:v4", "5:5:v5", "6:5:v6"}
			if got := values(t, f.log); !slices.Equal(got, want) {
				t.Fatalf("follower's log %v, want %v (rounds %v)", got, want, rounds)
			}
			// Two truncation rounds (to 4, then to 2), then the fetch that brings the records.
			want1 := []RequestKind{RequestFetch, RequestFetch, RequestFetch}
			if mode.cfg.UseOffsetForLeaderEpoch {
				want1 = []RequestKind{RequestOffsetForLeaderEpoch, RequestOffsetForLeaderEpoch, RequestFetch}
			}
			if !slices.Equal(rounds, want1) {
				t.Fatalf("rounds %v, want %v", rounds, want1)
			}
			sameBelow(t, l.log.LogEndOffset(), l, f)
		})
	}
}

// writeEpochs writes one single-record batch per entry of epochs, each stamped with it, as a
// succession of leaders would have; record i holds "v<i>".
func writeEpochs(t *testing.T, n *replicaNode, epochs []int32) {
	t.Helper()
	for i, ep := range epochs {
		if err := n.epochs.Assign(ep, n.log.LogEndOffset()); err != nil {
			t.Fatal(err)
		}
		if _, err := n.log.Append(buildBatch(t, "v"+string(rune('0'+i))), storage.AppendOptions{AssignOffsets: true, LeaderEpoch: ep}); err != nil {
			t.Fatal(err)
		}
	}
}

// OFFSET_OUT_OF_RANGE: a follower behind the leader's log start starts over at it; a follower
// ahead of the leader's log end (no epochs to tell, as after an unclean election between
// replicas with no common epoch history) truncates to it.
func TestFollowerOutOfRange(t *testing.T) {
	t.Run("behind the leader's log start", func(t *testing.T) {
		l, f := pair(t, FollowerConfig{BackoffMs: 100})
		now := int64(1_000_000)
		l.lead(regAB(1, 1, 1), now)
		for i := range 20 {
			l.produce(now, "x"+string(rune('a'+i)))
		}
		if err := l.log.SetLogStartOffset(15); err != nil {
			t.Fatal(err)
		}
		if err := l.epochs.TruncateFromStart(15); err != nil {
			t.Fatal(err)
		}
		f.follow(1, 1)
		kinds := []RequestKind{f.fetchRound(l, now), f.fetchRound(l, now)}
		if !slices.Equal(kinds, []RequestKind{RequestFetch, RequestListOffsets}) && !slices.Equal(kinds, []RequestKind{RequestOffsetForLeaderEpoch, RequestListOffsets}) {
			t.Fatalf("requests %v", kinds)
		}
		if f.log.LogStartOffset() != 15 || f.log.LogEndOffset() != 15 {
			t.Fatalf("follower log %d..%d", f.log.LogStartOffset(), f.log.LogEndOffset())
		}
		f.catchUp(l, now)
		sameBelow(t, 20, l, f)
		if f.log.LogStartOffset() != 15 {
			t.Fatal(f.log.LogStartOffset())
		}
	})
	t.Run("ahead of the leader's log end", func(t *testing.T) {
		l, f := pair(t, FollowerConfig{BackoffMs: 100})
		now := int64(1_000_000)
		// The follower has records from epoch 3 the leader (epoch 4, unclean) never had; the
		// leader's history has no epoch below 4 the follower could match.
		writeEpochs(t, f, []int32{3, 3, 3, 3})
		writeEpochs(t, l, []int32{4, 4})
		l.lead(Registration{Leader: 1, LeaderEpoch: 5, PartitionEpoch: 1, Replicas: []int32{1, 2}, ISR: []int32{1}}, now)
		f.follow(1, 5)
		f.catchUp(l, now)
		if got := values(t, f.log); !slices.Equal(got, []string{"0:4:v0", "1:4:v1"}) {
			t.Fatalf("follower's log %v", got)
		}
	})
}

// Errors in fetch answers, stale answers, and malformed records.
func TestFollowerFetchAnswers(t *testing.T) {
	l, f := pair(t, FollowerConfig{BackoffMs: 100})
	now := int64(1_000_000)
	l.lead(regAB(1, 3, 1, 2), now)
	l.produce(now, "a", "b")
	l.produce(now, "c")
	f.follow(1, 3)
	local := f.local()

	req := f.follower.Next(local, now)
	if req.Kind != RequestFetch || req.FetchOffset != 0 || req.LastFetchedEpoch != -1 || req.CurrentLeaderEpoch != 3 {
		t.Fatalf("first request %+v", req)
	}
	good := serveFetch(l, 2, req, now)

	// Stale answers change nothing.
	stale := req
	stale.CurrentLeaderEpoch = 2
	if act, err := f.follower.HandleFetch(stale, good, local, now); err != nil || !act.Empty() {
		t.Fatalf("answer to another epoch's request: %+v %v", act, err)
	}
	stale = req
	stale.FetchOffset = 1
	if act, err := f.follower.HandleFetch(stale, good, local, now); err != nil || !act.Empty() {
		t.Fatalf("answer for another offset: %+v %v", act, err)
	}

	// A trailing partial batch is ignored; a corrupt batch is refused with a back-off.
	partial := good
	partial.Records = good.Records[:len(good.Records)-5]
	act, err := f.follower.HandleFetch(req, partial, local, now)
	if err != nil || act.Append == nil || len(act.Append) >= len(partial.Records) {
		t.Fatalf("partial batch: %+v %v", act, err)
	}
	corrupt := good
	corrupt.Records = slices.Clone(good.Records)
	corrupt.Records[len(corrupt.Records)-1] ^= 0xff
	if _, err := f.follower.HandleFetch(req, corrupt, local, now); !errors.Is(err, batch.ErrBadCRC) {
		t.Fatalf("corrupt batch: %v", err)
	}
	if r := f.follower.Next(local, now+99); r.Kind != RequestNone {
		t.Fatalf("no back-off after a corrupt batch: %+v", r)
	}
	now += 100

	// A batch straddling our log end offset.
	act, err = f.follower.HandleFetch(req, good, local, now)
	if err != nil {
		t.Fatal(err)
	}
	f.apply(act)
	if f.log.LogEndOffset() != 3 || f.hw != 0 {
		t.Fatalf("after the first fetch: LEO %d HW %d", f.log.LogEndOffset(), f.hw)
	}
	straddle := FetchAnswer{HighWatermark: 3, Records: good.Records} // starts at 0 again
	req = f.follower.Next(f.local(), now)
	if act, err := f.follower.HandleFetch(req, straddle, f.local(), now); err != nil || len(act.Append) != 0 {
		t.Fatalf("batches already here are skipped: %+v %v", act, err)
	}
	mid := slices.Clone(good.Records)
	batch.SetBaseOffset(mid, 2) // [2,3] against a log end offset of 3
	if _, err := f.follower.HandleFetch(req, FetchAnswer{Records: mid}, f.local(), now); !errors.Is(err, storage.ErrOffsetOutOfOrder) {
		t.Fatalf("straddling batch: %v", err)
	}
	now += 100

	// UNKNOWN_LEADER_EPOCH backs off; FENCED_LEADER_EPOCH stops until a newer epoch.
	req = f.follower.Next(f.local(), now)
	if _, err := f.follower.HandleFetch(req, FetchAnswer{Err: kerr.UnknownLeaderEpoch}, f.local(), now); !errors.Is(err, kerr.UnknownLeaderEpoch) {
		t.Fatal(err)
	}
	if r := f.follower.Next(f.local(), now); r.Kind != RequestNone {
		t.Fatalf("no back-off: %+v", r)
	}
	now += 100
	req = f.follower.Next(f.local(), now)
	if req.Kind != RequestFetch {
		t.Fatalf("after the back-off: %+v", req)
	}
	if _, err := f.follower.HandleFetch(req, FetchAnswer{Err: kerr.FencedLeaderEpoch}, f.local(), now); !errors.Is(err, kerr.FencedLeaderEpoch) {
		t.Fatal(err)
	}
	if f.follower.Phase() != PhaseFenced || f.follower.Next(f.local(), now+1_000_000).Kind != RequestNone {
		t.Fatal("fenced follower still fetches")
	}
	if ok, _ := f.follower.UpdateLeader(1, 3, f.local()); ok {
		t.Fatal("the same epoch restarted the follower")
	}
	if ok, act := f.follower.UpdateLeader(1, 4, f.local()); !ok || !act.Empty() {
		t.Fatal("a newer epoch did not restart the follower")
	}
	if r := f.follower.Next(f.local(), now); r.Kind != RequestFetch || r.CurrentLeaderEpoch != 4 || r.LastFetchedEpoch != 3 || r.FetchOffset != 3 {
		t.Fatalf("after the new epoch: %+v", r)
	}
	// The leader has not caught up with epoch 4 yet.
	if f.fetchRound(l, now); f.follower.Next(f.local(), now).Kind != RequestNone {
		t.Fatal("no back-off after UNKNOWN_LEADER_EPOCH")
	}
}

// The follower's high watermark follows the leader's, never past its own log end offset, and
// its log start offset follows the leader's, never past its high watermark.
func TestFollowerHighWatermarkAndLogStart(t *testing.T) {
	_, f := pair(t, FollowerConfig{})
	f.follow(1, 1)
	l := f.local()
	b1 := buildBatch(t, "a", "b", "c")
	batch.SetPartitionLeaderEpoch(b1, 1)
	req := f.follower.Next(l, 0)
	act, err := f.follower.HandleFetch(req, FetchAnswer{HighWatermark: 10, LogStartOffset: 2, Records: b1}, l, 0)
	if err != nil {
		t.Fatal(err)
	}
	if act.HighWatermark != 3 || act.LogStartOffset != 2 {
		t.Fatalf("action %+v", act)
	}
	f.apply(act)
	if f.log.LogStartOffset() != 2 || f.hw != 3 || f.epochs.LatestEpoch() != 1 {
		t.Fatalf("LSO %d HW %d epoch %d", f.log.LogStartOffset(), f.hw, f.epochs.LatestEpoch())
	}
	if got := f.epochs.Entries(); !slices.Equal(got, []storage.EpochEntry{{Epoch: 1, StartOffset: 2}}) {
		t.Fatalf("epochs %v", got)
	}
	// A new leader's lower high watermark is followed; the log start offset never goes back.
	req = f.follower.Next(f.local(), 0)
	act, err = f.follower.HandleFetch(req, FetchAnswer{HighWatermark: 2, LogStartOffset: 0}, f.local(), 0)
	if err != nil || act.HighWatermark != 2 || act.LogStartOffset != -1 || act.Append != nil {
		t.Fatalf("action %+v %v", act, err)
	}
}

// A log with records but no leader epochs (written before epochs) truncates to its high
// watermark before following: there is nothing else to compare.
func TestFollowerWithoutEpochs(t *testing.T) {
	_, f := pair(t, FollowerConfig{})
	for range 4 {
		if _, err := f.log.Append(buildBatch(t, "old"), storage.AppendOptions{AssignOffsets: true, LeaderEpoch: -1}); err != nil {
			t.Fatal(err)
		}
	}
	f.hw = 2
	f.follow(1, 1)
	if f.log.LogEndOffset() != 2 {
		t.Fatalf("log end offset %d", f.log.LogEndOffset())
	}
}

// The leader-side epoch checks.
func TestLeaderEpochChecks(t *testing.T) {
	for _, tc := range []struct {
		local, req int32
		want       error
	}{{5, -1, nil}, {5, 5, nil}, {5, 4, ErrFencedLeaderEpoch}, {5, 6, ErrUnknownLeaderEpoch}} {
		if err := CheckCurrentLeaderEpoch(tc.local, tc.req); !errors.Is(err, tc.want) || (tc.want == nil && err != nil) {
			t.Errorf("CheckCurrentLeaderEpoch(%d, %d) = %v, want %v", tc.local, tc.req, err, tc.want)
		}
	}

	n := newNode(t, 1)
	writeEpochs(t, n, []int32{1, 1, 3, 3, 3, 5})  // 1:[0,2) 3:[2,5) 5:[5,6)
	if err := n.epochs.Assign(7, 6); err != nil { // a leader of epoch 7 that has written nothing
		t.Fatal(err)
	}
	const leo = 6
	cases := []struct {
		name        string
		fetchOffset int64
		lastEpoch   int32
		div         *EpochEndOffset
		err         error
	}{
		{"no last fetched epoch", 4, -1, nil, nil},
		{"agrees inside epoch 1", 2, 1, nil, nil},
		{"agrees at the end", 6, 5, nil, nil},
		{"past the end of its epoch", 3, 1, &EpochEndOffset{1, 2}, nil},
		{"an epoch the leader never had", 4, 2, &EpochEndOffset{1, 2}, nil},
		{"an epoch the leader never had, offset inside its end", 2, 2, &EpochEndOffset{1, 2}, nil},
		{"the current epoch, past the log end", 8, 7, &EpochEndOffset{7, 6}, nil},
		{"an epoch newer than the leader's", 6, 8, nil, storage.ErrOffsetOutOfRange},
	}
	for _, tc := range cases {
		div, err := DivergingEpoch(n.epochs, 0, leo, tc.fetchOffset, tc.lastEpoch)
		if !errors.Is(err, tc.err) || (tc.err == nil && err != nil) {
			t.Errorf("%s: err %v, want %v", tc.name, err, tc.err)
		}
		if (div == nil) != (tc.div == nil) || (div != nil && *div != *tc.div) {
			t.Errorf("%s: diverging %v, want %v", tc.name, div, tc.div)
		}
	}
	if _, err := DivergingEpoch(n.epochs, 3, leo, 2, 1); !errors.Is(err, storage.ErrOffsetOutOfRange) {
		t.Errorf("fetch below the log start: %v", err)
	}
	if got := LastOffsetForLeaderEpoch(n.epochs, leo, 4); got != (EpochEndOffset{3, 5}) {
		t.Errorf("OffsetForLeaderEpoch(4) = %v", got)
	}
	if got := LastOffsetForLeaderEpoch(n.epochs, leo, 9); got != (EpochEndOffset{-1, -1}) {
		t.Errorf("OffsetForLeaderEpoch(9) = %v", got)
	}
}

// A broker that led an epoch without writing anything has that epoch in its cache, at its log
// end offset, and no batch of it. Following the next leader, the empty epoch must go (Kafka's
// truncateTo at the log end offset), or every fetch would report it and diverge forever.
func TestFollowerFormerLeaderWithEmptyEpoch(t *testing.T) {
	for _, mode := range truncationModes {
		t.Run(mode.name, func(t *testing.T) {
			a, b := pair(t, mode.cfg)
			now := int64(1_000_000)
			a.lead(regAB(1, 1, 1, 2), now)
			b.follow(1, 1)
			a.produce(now, "m1")
			b.catchUp(a, now)
			// B leads epoch 2 but writes nothing; A takes over in epoch 3 and writes.
			b.lead(regAB(2, 2, 1, 2), now)
			a.follow(2, 2)
			a.lead(regAB(1, 3, 1, 2), now)
			a.produce(now, "m2")
			b.follow(1, 3)
			if got := b.epochs.LatestEpoch(); got != 2 {
				t.Fatalf("B's latest epoch %d", got)
			}
			b.catchUp(a, now)
			if got := values(t, b.log); !slices.Equal(got, []string{"0:1:m1", "1:3:m2"}) {
				t.Fatalf("B's log %v", got)
			}
			if got := b.epochs.Entries(); !slices.Equal(got, []storage.EpochEntry{{Epoch: 1, StartOffset: 0}, {Epoch: 3, StartOffset: 1}}) {
				t.Fatalf("B's epochs %v", got)
			}
		})
	}
}

// A leader that has not applied the metadata yet (UNKNOWN_LEADER_EPOCH,
// NOT_LEADER_OR_FOLLOWER) is asked again soon, then less and less often up to the back-off;
// an answer resets the pause. Other errors wait the whole back-off.
func TestFollowerRetriesALeaderBehindSoon(t *testing.T) {
	l, f := pair(t, FollowerConfig{BackoffMs: 1000})
	now := int64(1_000_000)
	l.lead(regAB(1, 3, 1, 2), now)
	l.produce(now, "a")
	f.follow(1, 3)

	behind := func(err error) int64 {
		t.Helper()
		req := f.follower.Next(f.local(), now)
		if req.Kind != RequestFetch {
			t.Fatalf("no fetch at %d: %+v", now, req)
		}
		if _, e := f.follower.HandleFetch(req, FetchAnswer{Err: err}, f.local(), now); !errors.Is(e, err) {
			t.Fatal(e)
		}
		at := f.follower.WakeAtMs(now)
		if at < 0 || f.follower.Next(f.local(), at-1).Kind != RequestNone {
			t.Fatalf("no pause after %v", err)
		}
		pause := at - now
		now = at
		return pause
	}
	var pauses []int64
	for _, err := range []error{kerr.UnknownLeaderEpoch, kerr.NotLeaderForPartition, kerr.UnknownLeaderEpoch, kerr.UnknownLeaderEpoch, kerr.UnknownLeaderEpoch, kerr.UnknownLeaderEpoch, kerr.UnknownLeaderEpoch, kerr.UnknownLeaderEpoch} {
		pauses = append(pauses, behind(err))
	}
	if want := []int64{10, 20, 40, 80, 160, 320, 640, 1000}; !slices.Equal(pauses, want) {
		t.Fatalf("pauses %v, want %v", pauses, want)
	}

	// The leader answers: the next time it is behind, the pause starts short again.
	f.fetchRound(l, now)
	if f.log.LogEndOffset() != 1 {
		t.Fatalf("LEO %d after the answer", f.log.LogEndOffset())
	}
	if p := behind(kerr.NotLeaderForPartition); p != 10 {
		t.Fatalf("pause after an answer: %d", p)
	}
	// Any other error waits the whole back-off.
	if p := behind(kerr.KafkaStorageError); p != 1000 {
		t.Fatalf("pause after KAFKA_STORAGE_ERROR: %d", p)
	}
}
