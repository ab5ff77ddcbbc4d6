package streamscluster

import (
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/gregor-project/gregor/streams"
)

// instance is one application instance process (this test binary in instance mode).
type instance struct {
	cmd    *exec.Cmd
	log    string
	exited chan error
}

func startInstance(t *testing.T, spec, name string) *instance {
	t.Helper()
	logPath := filepath.Join(t.TempDir(), name+".log")
	f, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	// Each instance is a machine of its own: its default state directory
	// (<temp dir>/gregor-streams) is the instance's.
	cmd.Env = append(os.Environ(), "STREAMS_INSTANCE="+spec, "TMPDIR="+t.TempDir())
	cmd.Stdout, cmd.Stderr = f, f
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	in := &instance{cmd: cmd, log: logPath, exited: make(chan error, 1)}
	go func() { in.exited <- cmd.Wait() }()
	t.Cleanup(func() {
		if in.cmd.ProcessState == nil {
			_ = in.cmd.Process.Kill()
			<-in.exited
		}
		if t.Failed() {
			b, _ := os.ReadFile(logPath)
			t.Logf("--- instance %s's output:\n%s", name, b)
		}
	})
	return in
}

func (in *instance) kill(t *testing.T) {
	t.Helper()
	if err := in.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if err := <-in.exited; err == nil {
		t.Fatal("the killed instance exited cleanly")
	}
}

func (in *instance) stop(t *testing.T) {
	t.Helper()
	if err := in.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-in.exited:
		if err != nil {
			b, _ := os.ReadFile(in.log)
			t.Fatalf("instance exit after SIGTERM: %v\n%s", err, b)
		}
	case <-time.After(time.Minute):
		t.Fatal("instance did not exit a minute after SIGTERM")
	}
}

// Three instances of one application run against the RF-3 cluster while input arrives;
// one is killed with SIGKILL mid-stream, its tasks move to the survivors (which restore
// their stores from the changelogs), and later an instance starts again with no local
// state and takes tasks back. With exactly_once_v2 every committed count is exact and each
// word's counts run 1..n; with at-least-once no count is missing.
func TestKillInstanceMidStream(t *testing.T) {
	for _, g := range []streams.Guarantee{streams.AtLeastOnce, streams.ExactlyOnceV2} {
		t.Run(string(g), func(t *testing.T) { testKill(t, g) })
	}
}

func testKill(t *testing.T, g streams.Guarantee) {
	c, cl := startCluster(t)
	exact := g == streams.ExactlyOnceV2
	spec := instanceSpec(c.Bootstrap(), "wc-kill", g)
	want := map[string]int64{}
	k := newChecker(t, c)

	input(t, cl, 0, 2000, want)
	var ins []*instance
	for i := range 3 {
		ins = append(ins, startInstance(t, spec, "instance-"+string(rune('a'+i))))
	}
	for k.read() == 0 {
	}
	input(t, cl, 2000, 4000, want) // arriving while the three process
	ins[1].kill(t)
	t.Log("killed instance b mid-stream")
	input(t, cl, 4000, 6000, want)
	k.await(want, exact, 2*time.Minute)

	// A new instance in b's place, its local state gone with the process: it is given tasks
	// in the rebalance, restores them from the changelogs and carries on counting.
	ins[1] = startInstance(t, spec, "instance-b2")
	input(t, cl, 6000, 8000, want)
	k.await(want, exact, 2*time.Minute)
	for _, in := range []*instance{ins[0], ins[2], ins[1]} {
		in.stop(t)
	}
	if exact {
		k.exactSequences()
	}
	t.Logf("%d words, %d counts read, guarantee %s", len(want), countAll(k.seq), g)
}

func countAll(seq map[string][]int64) int {
	n := 0
	for _, s := range seq {
		n += len(s)
	}
	return n
}
