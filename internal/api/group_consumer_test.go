package api_test

import (
	"testing"

	"github.com/gregor-project/gregor/internal/testutil"
)

// Two, then three franz-go consumers share six partitions; no partition is ever owned by
// two members at once.
func TestGroupMembersShareSixPartitions(t *testing.T) {
	b := testutil.StartBroker(t, groupBroker...)
	createTopic(t, b.Addr(), "six", 6, nil)
	own := newGroupOwnership()
	m1 := startGroupMember(t, b.Addr(), "share", "six", "m1", own)
	m2 := startGroupMember(t, b.Addr(), "share", "six", "m2", own)
	groupBalanced(t, 6, m1, m2)
	m3 := startGroupMember(t, b.Addr(), "share", "six", "m3", own)
	groupBalanced(t, 6, m1, m2, m3)
	own.check(t)
}
