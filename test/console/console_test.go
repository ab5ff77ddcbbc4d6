package console

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/gregor-project/gregor/embed"
	"github.com/gregor-project/gregor/internal/console"
	"github.com/gregor-project/gregor/internal/testutil"
)

// The console in a browser, against a three-node cluster: browser.js opens the overview,
// creates a topic, produces three records from the form and finds them by key, sees the
// lag of a group that consumed them (this test consumes them with a franz-go group client
// and commits, when the script asks) go from 0 to 3 with a reset to earliest, deletes the
// topic and sees its page answer "not found", and sees a broker this test stops shown
// offline, its partitions under-replicated. Screenshots of every page go to
// test/console/screenshots.
func TestConsoleInBrowser(t *testing.T) {
	if _, err := os.Stat("node_modules/playwright-core"); err != nil {
		t.Fatalf("playwright-core is not installed in test/console/node_modules: scripts/test installs it (npm ci): %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	c, err := embed.StartCluster(ctx, 3, embed.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()

	con, err := console.New(console.Config{
		Seeds:    func() ([]string, error) { return c.Addrs(), nil },
		Interval: time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer con.Close()
	const topic, group = "console-orders", "console-group"

	mux := http.NewServeMux()
	mux.Handle("/", con.Handler())
	// The script's calls for what a browser cannot do: consume as a group member, stop a broker.
	mux.HandleFunc("POST /control/consume", func(w http.ResponseWriter, r *http.Request) {
		if err := consumeAndCommit(r.Context(), c.Bootstrap(), topic, group, 3); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
		}
	})
	var mu sync.Mutex
	var member *kgo.Client // guarded by mu: a member of group while the script holds one (/join, /leave)
	leave := func() {
		mu.Lock()
		defer mu.Unlock()
		if member != nil {
			member.Close() // leaves the group
			member = nil
		}
	}
	mux.HandleFunc("POST /control/join", func(w http.ResponseWriter, r *http.Request) {
		cl, err := joinGroup(r.Context(), c.Bootstrap(), topic, group)
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		mu.Lock()
		member = cl
		mu.Unlock()
	})
	mux.HandleFunc("POST /control/leave", func(http.ResponseWriter, *http.Request) { leave() })
	defer leave()
	mux.HandleFunc("POST /control/stop", func(w http.ResponseWriter, r *http.Request) {
		if err := c.Stop(3); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
		}
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			t.Errorf("serving the console: %v", err)
		}
	}()
	defer srv.Close()

	shots, err := filepath.Abs("screenshots")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(shots); err != nil { // no screenshot of an earlier run is left
		t.Fatal(err)
	}
	if err := os.MkdirAll(shots, 0o755); err != nil {
		t.Fatal(err)
	}
	url := "http://" + ln.Addr().String()
	cmd := exec.CommandContext(ctx, "node", "browser.js")
	cmd.Env = append(os.Environ(), "CONSOLE_URL="+url, "CONTROL_URL="+url+"/control",
		"SCREENSHOTS="+shots, "TOPIC="+topic, "GROUP="+group)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("browser.js: %v\n%s(screenshots in %s)", err, out, shots)
	}
	t.Logf("screenshots in %s", shots)
}

// consumeAndCommit reads n records of topic as a member of group, commits them and leaves.
func consumeAndCommit(ctx context.Context, bootstrap, topic, group string, n int) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(bootstrap, ",")...), kgo.ConsumerGroup(group),
		kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.DisableAutoCommit())
	if err != nil {
		return err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	got := 0
	for got < n {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("consumed %d of %d records: %w", got, n, err)
		}
		if err := fs.Err0(); err != nil {
			return err
		}
		got += fs.NumRecords()
	}
	return cl.CommitUncommittedOffsets(ctx)
}

// joinGroup starts a member of group (client id console-test-member) consuming topic and
// returns once it has its assignment; closing the client leaves the group.
func joinGroup(ctx context.Context, bootstrap, topic, group string, opts ...kgo.Opt) (*kgo.Client, error) {
	assigned := make(chan struct{})
	var once sync.Once
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(strings.Split(bootstrap, ",")...), kgo.ConsumerGroup(group),
		kgo.ConsumeTopics(topic), kgo.ClientID("console-test-member"), kgo.DisableAutoCommit(),
		kgo.OnPartitionsAssigned(func(context.Context, *kgo.Client, map[string][]int32) { once.Do(func() { close(assigned) }) }),
	}, opts...)...)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	go func() { // joining happens in polls
		for ctx.Err() == nil {
			cl.PollFetches(ctx)
		}
	}()
	select {
	case <-assigned:
		return cl, nil
	case <-ctx.Done():
		cl.Close()
		return nil, fmt.Errorf("joining group %s: %w", group, ctx.Err())
	}
}

// The broker serves the console under /console/ on its http.listener, as a client of its
// own listener: "/" leads to the overview, which lists the broker; an unknown topic's page
// is "not found"; the reassignments page lists none and elects preferred leaders.
func TestBrokerServesConsole(t *testing.T) {
	addr := fmt.Sprintf("127.0.0.1:%d", testutil.FreePort(t))
	testutil.StartBroker(t, "http.listener="+addr) // node.id 1
	cl := &http.Client{Timeout: 20 * time.Second}
	res, err := cl.Get("http://" + addr + "/")
	if err != nil {
		t.Fatal(err)
	}
	body := readAll(t, res)
	if res.StatusCode != http.StatusOK || res.Request.URL.Path != "/console/" {
		t.Fatalf("GET /: %d at %s", res.StatusCode, res.Request.URL)
	}
	if !strings.Contains(body, `id="brokers"`) || !strings.Contains(body, `data-broker="1"`) {
		t.Fatalf("overview without this broker:\n%s", body)
	}
	res, err = cl.Get("http://" + addr + "/console/topics/no-such-topic")
	if err != nil {
		t.Fatal(err)
	}
	if body := readAll(t, res); res.StatusCode != http.StatusNotFound || !strings.Contains(body, `id="not-found"`) {
		t.Fatalf("unknown topic: %d\n%s", res.StatusCode, body)
	}
	// A preferred leader election from the reassignments page answers with its result.
	res, err = cl.PostForm("http://"+addr+"/console/elect", nil)
	if err != nil {
		t.Fatal(err)
	}
	if body := readAll(t, res); res.StatusCode != http.StatusOK || !strings.Contains(body, "Preferred leader election:") || !strings.Contains(body, `id="reassignments"`) {
		t.Fatalf("elect: %d\n%s", res.StatusCode, body)
	}
}

func readAll(t *testing.T, res *http.Response) string {
	t.Helper()
	defer res.Body.Close()
	var b strings.Builder
	if _, err := io.Copy(&b, res.Body); err != nil {
		t.Fatal(err)
	}
	return b.String()
}
