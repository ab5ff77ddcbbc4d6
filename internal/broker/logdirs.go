package broker

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregor-project/gregor/internal/storage"
)

// A failed log dir (KIP-858; Kafka's LogDirFailureChannel and ReplicaManager.handleLogDirFailure).
//
// An I/O error takes a log offline and storage reports it (Manager.OnLogOffline, holding that
// log's locks); the report is queued here and the failure loop, on a goroutine of its own:
//  1. fails the whole log dir (storage.Manager.FailDir): every log in it goes offline, its
//     partitions are never re-created in another dir, and DescribeLogDirs answers
//     KAFKA_STORAGE_ERROR for it;
//  2. stops fetching for the dir's partitions, and from then on reconcilePartition neither
//     leads nor follows a partition whose log is offline (produce and fetch answer
//     KAFKA_STORAGE_ERROR, api.partition), so a follower with a dead log never looks caught
//     up to its leader;
//  3. reports the dir to the controller: its id in every BrokerHeartbeat (OfflineLogDirs), and
//     its replicas in AssignReplicasToDirs (retried until the controller answers), upon which
//     the controller takes this broker out of their ISRs and moves their leaderships
//     (state/offlinedirs.go);
//  4. when every log dir has failed, calls Options.OnLogDirFailure (`gregor server` halts,
//     as Kafka's broker does once no log dir is left).
//
// The broker keeps serving the partitions of its other dirs throughout.

// dirFailures queues the failed log dirs reported by storage until the failure loop takes
// them. mu guards pending; kick wakes the loop (buffered, one pending wake-up).
type dirFailures struct {
	mu      sync.Mutex
	pending map[string]error // log dir -> first error seen there
	kick    chan struct{}
}

// report queues a failed log dir. It takes only dirFailures.mu, so storage may call it
// holding a log's locks.
func (d *dirFailures) report(dir string, err error) {
	d.mu.Lock()
	if _, ok := d.pending[dir]; !ok {
		d.pending[dir] = err
	}
	d.mu.Unlock()
	select {
	case d.kick <- struct{}{}:
	default:
	}
}

func (d *dirFailures) take() map[string]error {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := d.pending
	d.pending = map[string]error{}
	return out
}

// onLogOffline is storage.Manager.OnLogOffline: partDir is the partition's (or future
// replica's) directory, in its log dir.
func (b *Broker) onLogOffline(partDir string, err error) {
	b.dirFailures.report(filepath.Dir(partDir), err)
}

// logDirFailureLoop fails the reported log dirs and reports them to the controller until ctx
// ends.
func (b *Broker) logDirFailureLoop(ctx context.Context) {
	var unreported []storage.FailedDir
	for {
		var retry <-chan time.Time
		if len(unreported) > 0 {
			retry = time.After(200 * time.Millisecond)
		}
		select {
		case <-ctx.Done():
			return
		case <-b.dirFailures.kick:
		case <-retry:
		}
		failed := b.dirFailures.take()
		for _, dir := range slices.Sorted(maps.Keys(failed)) {
			if f, ok := b.failLogDir(dir, failed[dir]); ok {
				unreported = append(unreported, f)
			}
		}
		unreported = slices.DeleteFunc(unreported, func(f storage.FailedDir) bool {
			err := b.reportOfflineReplicas(ctx, f)
			if err != nil && ctx.Err() == nil {
				b.log.Warn("reporting the replicas of a failed log dir to the controller failed; retrying", "dir_id", f.ID.String(), "err", err)
			}
			return err == nil
		})
	}
}

// failLogDir takes the log dir offline and its partitions out of replication, returning what
// the controller must be told (ok false: nothing new to tell).
func (b *Broker) failLogDir(dir string, cause error) (storage.FailedDir, bool) {
	f, err := b.logs.FailDir(dir, cause)
	if err != nil {
		b.log.Error("failing a log dir", "log_dir", dir, "err", err)
		return f, false
	}
	if f.AllFailed && b.onAllLogDirsFailed != nil {
		b.onAllLogDirsFailed(dir, cause)
	}
	if !f.First {
		return f, false
	}
	if b.replicas != nil && b.fetchers != nil {
		for _, tp := range f.Partitions {
			if p := b.replicas.Get(tp.Topic, tp.Partition); p != nil {
				b.fetchers.Unfollow(p)
			}
		}
	}
	select { // the next heartbeat names the dir at once
	case b.kickHeartbeat <- struct{}{}:
	default:
	}
	return f, len(f.Partitions) > 0
}

// reportOfflineReplicas sends the controller AssignReplicasToDirs naming the failed dir and
// its replicas (those of topics the metadata knows; the others are gone already).
func (b *Broker) reportOfflineReplicas(ctx context.Context, f storage.FailedDir) error {
	if b.ctrl == nil {
		return nil
	}
	req := kmsg.NewPtrAssignReplicasToDirsRequest()
	req.BrokerID = b.cfg.NodeID
	req.BrokerEpoch = b.epoch.Load()
	d := kmsg.NewAssignReplicasToDirsRequestDirectory()
	d.ID = f.ID
	im := b.meta.Image()
	byTopic := map[string]int{}
	for _, tp := range f.Partitions {
		t := im.Topic(tp.Topic)
		if t == nil {
			continue
		}
		i, ok := byTopic[tp.Topic]
		if !ok {
			i = len(d.Topics)
			byTopic[tp.Topic] = i
			dt := kmsg.NewAssignReplicasToDirsRequestDirectoryTopic()
			dt.TopicID = [16]byte(t.ID)
			d.Topics = append(d.Topics, dt)
		}
		p := kmsg.NewAssignReplicasToDirsRequestDirectoryTopicPartition()
		p.Partition = tp.Partition
		d.Topics[i].Partitions = append(d.Topics[i].Partitions, p)
	}
	if len(d.Topics) == 0 {
		return nil
	}
	req.Directories = append(req.Directories, d)
	rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	resp, err := b.ctrl.Request(rctx, req)
	if err != nil {
		return err
	}
	r := resp.(*kmsg.AssignReplicasToDirsResponse)
	if err := kerr.ErrorForCode(r.ErrorCode); err != nil {
		return err
	}
	var errs []error
	for _, rd := range r.Directories {
		for _, rt := range rd.Topics {
			for _, rp := range rt.Partitions {
				if err := kerr.ErrorForCode(rp.ErrorCode); err != nil {
					errs = append(errs, fmt.Errorf("topic id %x partition %d: %w", rt.TopicID, rp.Partition, err))
				}
			}
		}
	}
	if len(errs) > 0 {
		// Per-partition refusals (a topic deleted meanwhile, a replica moved away) are final.
		b.log.Warn("the controller refused some replicas of a failed log dir", "err", errors.Join(errs...))
	}
	b.log.Info("reported the replicas of a failed log dir to the controller", "dir_id", f.ID.String(), "partitions", len(f.Partitions))
	return nil
}

// offlineDirIDs are the failed log dirs' ids, for BrokerHeartbeat's OfflineLogDirs.
func (b *Broker) offlineDirIDs() [][16]byte {
	var out [][16]byte
	for _, id := range b.logs.OfflineDirIDs() {
		out = append(out, [16]byte(id))
	}
	return out
}
