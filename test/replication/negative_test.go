package replication

import (
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/gregor-project/gregor/internal/testutil"
)

// The negative control: a configuration that may lose acknowledged records
// does lose them, and the checker sees it. With replication factor 2,
// min.insync.replicas 1, acks=1 and unclean leader election enabled:
//
//  1. the follower is cut off, falls out of the ISR, and the leader alone
//     acknowledges more records;
//  2. the leader is killed (kill -9), so no ISR member is left and the
//     partition has no leader;
//  3. the follower is healed: the only live replica, it becomes leader
//     uncleanly, without the records only the old leader had;
//  4. the old leader restarts, follows the new one and truncates its log
//     to it.
//
// The checker must report those acknowledged records lost (a checker that
// cannot fail proves nothing), and the replicas must still be identical
// below the high watermark (the old leader truncated). The controller must
// log the unclean election.
func TestUncleanElectionLosesAcknowledgedRecords(t *testing.T) {
	// Node 1 is the only controller and holds no replica, so cutting off
	// the follower and killing the leader never touch the quorum.
	c := testutil.StartCluster(t, testutil.ClusterOptions{Nodes: 1})
	c.AddBroker(2)
	c.AddBroker(3)
	const topic = "unclean"
	const leaderID, followerID = 2, 3
	createTopicOn(t.Context(), t, c, topic, []int32{leaderID, followerID}, map[string]string{
		"min.insync.replicas":            "1",
		"unclean.leader.election.enable": "true",
	})
	leadWithFullISR(t, c, topic, leaderID)
	leader := c.Node(leaderID)

	acks := kgo.LeaderAck()
	p := StartProducer(t, c, topic, ProducerOptions{Seeds: []string{leader.ClientAddr()}, Acks: &acks, Rate: 200, DeliveryTimeout: 5 * time.Second})
	p.WaitAcked(t, 200, 30*time.Second)

	c.Isolate(followerID)
	WaitPartition(t, c, topic, 0, 30*time.Second, func(s PartitionState) bool { return s.Leader == leaderID && !s.InISR(followerID) },
		"the cut-off follower out of the ISR", leader.ClientAddr())
	// Records the follower cannot have: acknowledged by the leader alone.
	p.WaitMoreAcked(t, 200, 30*time.Second)
	res := p.Stop()

	leader.Kill()
	// The controller fences the dead leader; the follower is fenced too (cut
	// off from the controller), so the partition has no leader.
	onController := []string{c.Node(1).ClientAddr()}
	c.WaitFor(t, 30*time.Second, func() bool {
		_, err := Partition(t.Context(), c, topic, 0, onController...)
		return errors.Is(err, kerr.LeaderNotAvailable)
	}, "the partition without a leader")

	c.Heal(followerID)
	WaitPartition(t, c, topic, 0, 30*time.Second, func(s PartitionState) bool { return s.Leader == followerID },
		"the healed follower elected uncleanly", onController...)
	leader.Start()

	rep := Check(t, c, topic, res)
	if len(rep.Lost) == 0 {
		t.Errorf("the checker found no acknowledged record lost after an unclean election that dropped the old leader's last records: %s", rep)
	}
	if len(rep.Duplicated) > 0 || len(rep.Gaps) > 0 || len(rep.Diverged) > 0 {
		t.Errorf("besides the loss, the log must be clean and the replicas identical: %v", rep.Problems())
	}
	t.Logf("acknowledged %d (acks=1), lost %d, failed %d, errors %v", rep.Acked, len(rep.Lost), rep.Failed, res.ErrorCounts())

	if n := countInLog(t, c.Node(1).LogFile, "unclean leader election"); n == 0 {
		t.Errorf("the controller (node 1) did not log the unclean leader election of %s[0]", topic)
	} else {
		t.Logf("the controller logged %d unclean leader election(s)", n)
	}
}

// countInLog counts the lines of the log file at path that contain s.
func countInLog(t *testing.T, path, s string) int {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for line := range strings.Lines(string(data)) {
		if strings.Contains(line, s) {
			n++
		}
	}
	return n
}
