package startup

import (
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/gregor-project/gregor/internal/testutil"
)

// cpuTicks is the user+system CPU time of process pid, in clock ticks (1/100 s on Linux).
func cpuTicks(t *testing.T, pid int) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Fatal(err)
	}
	// Fields after the parenthesised command name; utime and stime are fields 14 and 15.
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+2:]))
	u, err1 := strconv.ParseInt(f[11], 10, 64)
	s, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		t.Fatalf("parse /proc/%d/stat: %v %v", pid, err1, err2)
	}
	return u + s
}

// When the broker runs out of file descriptors it cannot accept connections; it must back off
// and log the failure now and then, not spin on accept (a core at 100% and a flood of log
// lines), and it must serve again (and say so) once descriptors are free.
func TestOutOfFileDescriptorsBacksOff(t *testing.T) {
	dir := t.TempDir()
	port := testutil.FreePort(t)
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	const limit = 64
	bin := testutil.Binary(t)
	p := startCmd(t, addr, "sh", "-c", fmt.Sprintf("ulimit -n %d && exec %s server --set log.dirs=%s --set listeners=PLAINTEXT://%s", limit, bin, dir, addr))
	p.waitLog(logStarted, startupDeadline)

	// Twice the limit in connections: the broker accepts until its descriptors run out; the
	// rest wait in the listen backlog.
	var conns []net.Conn
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	for i := 0; i < 2*limit; i++ {
		c, err := net.DialTimeout("tcp", addr, 5*time.Second)
		if err != nil {
			t.Fatalf("dial %d: %v", i, err)
		}
		conns = append(conns, c)
	}
	p.waitLog("too many open files", startupDeadline)

	// Over one second of exhaustion, the broker uses little CPU and logs a few lines.
	before, ticks0 := strings.Count(p.log(), "accept failed"), cpuTicks(t, p.cmd.Process.Pid)
	time.Sleep(time.Second) // the measurement window, not synchronisation
	after, ticks1 := strings.Count(p.log(), "accept failed"), cpuTicks(t, p.cmd.Process.Pid)
	t.Logf("out of descriptors for 1s: %d accept-failure lines, %d ms of CPU", after-before, (ticks1-ticks0)*10)
	if after-before > 2 { // the first failure is logged, then one line every 10 s
		t.Errorf("%d accept-failure lines in one second: the broker spins on accept or does not rate-limit its log", after-before)
	}
	if cpu := (ticks1 - ticks0) * 10; cpu > 300 {
		t.Errorf("%d ms of CPU in one second of descriptor exhaustion: the broker spins on accept", cpu)
	}

	// Free the descriptors: the broker serves new clients again.
	for _, c := range conns {
		c.Close()
	}
	conns = nil
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if err := cl.Ping(ctxT(t, 30*time.Second)); err != nil {
		t.Fatalf("broker does not serve after descriptors were freed: %v", err)
	}
	p.waitLog("accepting connections again", startupDeadline)
}
