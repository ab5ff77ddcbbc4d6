package api

import (
	"context"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kmsg"
	"golang.org/x/sys/unix"

	"github.com/gregor-project/gregor/internal/storage"
)

// DescribeLogDirs v0-v4: every log dir of log.dirs, in order, with each of its partitions'
// size on disk (all of them when the request names no topics), a replica being moved into the
// dir (AlterReplicaLogDirs) as a future one (is_future_key, offset_lag: how far it is behind
// the current replica), and from v4 the file system's total and usable bytes.

func handleDescribeLogDirs(h *Handler, _ context.Context, c *Conn, r kmsg.Request) Reply {
	req := r.(*kmsg.DescribeLogDirsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeLogDirsResponse)
	if err := h.clusterDenied(c, kmsg.ACLOperationDescribe); err != nil { // authorize.go
		resp.ErrorCode = code(err) // v3+; no results either way, as Kafka
		return msg(resp)
	}
	for _, u := range h.Logs.Usage() {
		resp.Dirs = append(resp.Dirs, describeLogDir(u, req.Topics))
	}
	return msg(resp)
}

// describeLogDir answers for one log dir: its partitions the request asks for (all when
// topics is nil), sorted by topic and partition.
func describeLogDir(u storage.DirUsage, topics []kmsg.DescribeLogDirsRequestTopic) kmsg.DescribeLogDirsResponseDir {
	dir := kmsg.NewDescribeLogDirsResponseDir()
	dir.Dir = u.Path
	dir.TotalBytes, dir.UsableBytes = -1, -1
	var st unix.Statfs_t
	if err := unix.Statfs(u.Path, &st); err == nil {
		dir.TotalBytes = int64(st.Blocks) * st.Bsize
		dir.UsableBytes = int64(st.Bavail) * st.Bsize
	}
	tps := make([]storage.TopicPartition, 0, len(u.Sizes)+len(u.Future))
	for tp := range u.Sizes {
		if topics == nil || wanted(topics, tp.Topic, tp.Partition) {
			tps = append(tps, tp)
		}
	}
	for tp := range u.Future {
		if _, dup := u.Sizes[tp]; !dup && (topics == nil || wanted(topics, tp.Topic, tp.Partition)) {
			tps = append(tps, tp)
		}
	}
	slices.SortFunc(tps, func(a, b storage.TopicPartition) int {
		if c := strings.Compare(a.Topic, b.Topic); c != 0 {
			return c
		}
		return int(a.Partition) - int(b.Partition)
	})
	for _, tp := range tps {
		if n := len(dir.Topics); n == 0 || dir.Topics[n-1].Topic != tp.Topic {
			t := kmsg.NewDescribeLogDirsResponseDirTopic()
			t.Topic = tp.Topic
			dir.Topics = append(dir.Topics, t)
		}
		dp := kmsg.NewDescribeLogDirsResponseDirTopicPartition()
		dp.Partition = tp.Partition
		if f, ok := u.Future[tp]; ok {
			dp.Size, dp.OffsetLag, dp.IsFuture = f.Size, f.Lag, true
		} else {
			dp.Size = u.Sizes[tp]
		}
		t := &dir.Topics[len(dir.Topics)-1]
		t.Partitions = append(t.Partitions, dp)
	}
	return dir
}

func wanted(topics []kmsg.DescribeLogDirsRequestTopic, topic string, part int32) bool {
	for _, t := range topics {
		if t.Topic == topic && slices.Contains(t.Partitions, part) {
			return true
		}
	}
	return false
}
