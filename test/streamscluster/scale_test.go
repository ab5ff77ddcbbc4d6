package streamscluster

import (
	"context"
	"testing"
	"time"

	"github.com/gregor-project/gregor/internal/testutil"
	"github.com/gregor-project/gregor/streams"
)

// running is an App of this process and the end of its Run.
type running struct {
	app  *streams.App
	done chan error
}

func runApp(t *testing.T, brokers []string, appID string) *running {
	t.Helper()
	app, err := newApp(brokers, appID, streams.ExactlyOnceV2, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	r := &running{app: app, done: make(chan error, 1)}
	go func() { r.done <- app.Run(context.Background()) }()
	t.Cleanup(func() { _ = r.close() })
	return r
}

func (r *running) close() error {
	if r.app == nil {
		return nil
	}
	err := r.app.Close()
	if rerr := <-r.done; err == nil {
		err = rerr
	}
	r.app = nil
	return err
}

// tasksHeld waits until each app holds exactly want[i] tasks and together all of them.
func tasksHeld(t *testing.T, c *testutil.Cluster, apps []*running, want []int) {
	t.Helper()
	c.WaitFor(t, 2*time.Minute, func() bool {
		for i, r := range apps {
			if len(r.app.Tasks()) != want[i] {
				return false
			}
		}
		return true
	}, "the tasks spread over the instances")
}

// One instance, then three, then one again, exactly once, with input arriving at each
// step: tasks move to the new instances and back (each instance's share of the tasks is
// watched through App.Tasks), and every count stays exact, each word's counts running 1..n.
func TestScaleOutAndIn(t *testing.T) {
	c, cl := startCluster(t)
	brokers := c.Bootstrap()
	want := map[string]int64{}
	k := newChecker(t, c)
	// Two sub-topologies (split and count) of six partitions each: twelve tasks.
	const tasks = 2 * partitions

	one := runApp(t, brokers, "wc-scale")
	input(t, cl, 0, 1500, want)
	tasksHeld(t, c, []*running{one}, []int{tasks})
	k.await(want, true, 2*time.Minute)

	two, three := runApp(t, brokers, "wc-scale"), runApp(t, brokers, "wc-scale")
	all := []*running{one, two, three}
	tasksHeld(t, c, all, []int{tasks / 3, tasks / 3, tasks / 3})
	t.Logf("scaled out: tasks %v | %v | %v", one.app.Tasks(), two.app.Tasks(), three.app.Tasks())
	input(t, cl, 1500, 3000, want)
	k.await(want, true, 2*time.Minute)

	for _, r := range []*running{two, three} {
		if err := r.close(); err != nil {
			t.Fatal(err)
		}
	}
	tasksHeld(t, c, []*running{one}, []int{tasks})
	input(t, cl, 3000, 4500, want)
	k.await(want, true, 2*time.Minute)
	if err := one.close(); err != nil {
		t.Fatal(err)
	}
	k.exactSequences()
}
