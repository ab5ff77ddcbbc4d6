package api

import (
	"context"
	"slices"

	"github.com/twmb/franz-go/pkg/kmsg"
	"golang.org/x/sys/unix"
)

// DescribeLogDirs v0-v4: the log dir with each partition's size on disk (all of them when the
// request names no topics), and from v4 the file system's total and usable bytes.

func handleDescribeLogDirs(h *Handler, _ context.Context, c *Conn, r kmsg.Request) Reply {
	req := r.(*kmsg.DescribeLogDirsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeLogDirsResponse)
	if err := h.clusterDenied(c, kmsg.ACLOperationDescribe); err != nil { // authorize.go
		resp.ErrorCode = code(err) // v3+; no results either way, as Kafka
		return msg(resp)
	}
	dir := kmsg.NewDescribeLogDirsResponseDir()
	dir.Dir = h.Logs.Dir()
	dir.TotalBytes, dir.UsableBytes = -1, -1
	var st unix.Statfs_t
	if err := unix.Statfs(dir.Dir, &st); err == nil {
		dir.TotalBytes = int64(st.Blocks) * st.Bsize
		dir.UsableBytes = int64(st.Bavail) * st.Bsize
	}
	byTopic := map[string]int{}
	for _, p := range h.Replicas.Partitions() {
		if req.Topics != nil && !wanted(req.Topics, p.Topic, p.Index) {
			continue
		}
		i, ok := byTopic[p.Topic]
		if !ok {
			i = len(dir.Topics)
			byTopic[p.Topic] = i
			t := kmsg.NewDescribeLogDirsResponseDirTopic()
			t.Topic = p.Topic
			dir.Topics = append(dir.Topics, t)
		}
		dp := kmsg.NewDescribeLogDirsResponseDirTopicPartition()
		dp.Partition = p.Index
		dp.Size = p.Log().Size()
		dir.Topics[i].Partitions = append(dir.Topics[i].Partitions, dp)
	}
	resp.Dirs = []kmsg.DescribeLogDirsResponseDir{dir}
	return msg(resp)
}

func wanted(topics []kmsg.DescribeLogDirsRequestTopic, topic string, part int32) bool {
	for _, t := range topics {
		if t.Topic == topic && slices.Contains(t.Partitions, part) {
			return true
		}
	}
	return false
}
