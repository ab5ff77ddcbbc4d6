package api

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregor-project/gregor/internal/replica"
	"github.com/gregor-project/gregor/internal/storage"
)

// AlterReplicaLogDirs v0-v2: move this broker's replicas of the named partitions to the named
// log dirs, while they serve (replica/movedir.go). Each partition's code, as Kafka's
// ReplicaManager.alterReplicaLogDirs answers:
//   - LOG_DIR_NOT_FOUND: the dir (made absolute, as Kafka does) is not one of log.dirs
//     (checked first);
//   - KAFKA_STORAGE_ERROR: the replica (or the dir) is offline;
//   - UNKNOWN_TOPIC_OR_PARTITION: no such partition in the cluster;
//   - INVALID_TOPIC_EXCEPTION: a topic name too long for the future replica's directory name;
//   - REPLICA_NOT_AVAILABLE: the partition exists but has no replica here (Kafka keeps this
//     code for AlterReplicaLogDirs where other APIs say NOT_LEADER_OR_FOLLOWER); the dir is
//     remembered for when one is created here;
//   - NONE: the move started (DescribeLogDirs shows the future replica until it is done), or
//     the replica is in that dir already (a move elsewhere in progress is given up).
//
// Authorization: ALTER on the cluster, else CLUSTER_AUTHORIZATION_FAILED for every partition.
// A partition named twice takes the last dir named, as Kafka's map of the request does.

func handleAlterReplicaLogDirs(h *Handler, _ context.Context, c *Conn, r kmsg.Request) Reply {
	req := r.(*kmsg.AlterReplicaLogDirsRequest)
	resp := req.ResponseKind().(*kmsg.AlterReplicaLogDirsResponse)
	denied := h.clusterDenied(c, kmsg.ACLOperationAlter) // authorize.go
	type key struct {
		topic string
		part  int32
	}
	dest := map[key]string{}
	var order []key
	for _, d := range req.Dirs {
		for _, t := range d.Topics {
			for _, p := range t.Partitions {
				k := key{t.Topic, p}
				if _, ok := dest[k]; !ok {
					order = append(order, k)
				}
				dest[k] = d.Dir
			}
		}
	}
	im := h.Meta.Image()
	byTopic := map[string]int{}
	for _, k := range order {
		err := denied
		if err == nil {
			t := im.Topic(k.topic)
			err = h.alterReplicaLogDir(k.topic, k.part, dest[k], t != nil && k.part >= 0 && k.part < t.Partitions)
		}
		if err != nil && !errors.Is(err, kerr.ClusterAuthorizationFailed) {
			h.Log.Info("alter replica log dir refused", "topic", k.topic, "partition", k.part, "dir", dest[k], "err", err)
		}
		i, ok := byTopic[k.topic]
		if !ok {
			i = len(resp.Topics)
			byTopic[k.topic] = i
			t := kmsg.NewAlterReplicaLogDirsResponseTopic()
			t.Topic = k.topic
			resp.Topics = append(resp.Topics, t)
		}
		p := kmsg.NewAlterReplicaLogDirsResponseTopicPartition()
		p.Partition = k.part
		p.ErrorCode = code(err)
		resp.Topics[i].Partitions = append(resp.Topics[i].Partitions, p)
	}
	return msg(resp)
}

// alterReplicaLogDir starts one move; exists says whether the partition is in the metadata.
func (h *Handler) alterReplicaLogDir(topic string, part int32, dir string, exists bool) error {
	abs, err := filepath.Abs(dir)
	if err != nil || !h.Logs.HasDir(abs) {
		return fmt.Errorf("%w: %q", storage.ErrLogDirNotFound, dir)
	}
	if !exists {
		return fmt.Errorf("%w: %s-%d", errUnknownPartition, topic, part)
	}
	if len(storage.FutureDirName(topic, part)) > 255 { // a file name's limit (Kafka's KAFKA-4893 check)
		return fmt.Errorf("%w: the topic name is too long for a future replica's directory", errInvalidTopic)
	}
	err = h.Replicas.AlterLogDir(topic, part, abs)
	if errors.Is(err, replica.ErrNotLeaderOrFollower) {
		return fmt.Errorf("%w: %v", kerr.ReplicaNotAvailable, err)
	}
	return err
}
