package console

import (
	"context"
	"net"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/gregor-project/gregor/internal/console"
	"github.com/gregor-project/gregor/internal/testutil"
)

// A KIP-848 group (franz-go's consumer protocol member) shows as a consumer group with its
// member and assignment, refuses a reset while the member is in it, and previews one once it
// has left.
func TestConsoleConsumerProtocolGroup(t *testing.T) {
	b := testutil.StartBroker(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const topic, group = "kip848-orders", "kip848-group"
	op, err := kgo.NewClient(kgo.SeedBrokers(b.Addr()))
	if err != nil {
		t.Fatal(err)
	}
	defer op.Close()
	if _, err := kadm.NewClient(op).CreateTopic(ctx, 2, 1, nil, topic); err != nil {
		t.Fatal(err)
	}
	con, err := console.New(console.Config{Seeds: func() ([]string, error) { return []string{b.Addr()}, nil }})
	if err != nil {
		t.Fatal(err)
	}
	defer con.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: con.Handler(), ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(ln) //nolint:errcheck // ends with ErrServerClosed at Close
	defer srv.Close()
	base := "http://" + ln.Addr().String()
	web := &http.Client{Timeout: 20 * time.Second}

	member, err := joinGroup(ctx, b.Addr(), topic, group, kgo.ServerSideBalancer())
	if err != nil {
		t.Fatal(err)
	}
	_, body := get(t, web, base+"/groups/"+group)
	for _, want := range []string{"<b>consumer</b>", "console-test-member", topic + "-0", topic + "-1"} {
		if !strings.Contains(body, want) {
			t.Fatalf("group page without %q:\n%s", want, body)
		}
	}
	reset := url.Values{"mode": {"latest"}, "action": {"preview"}}
	if res, body := post(t, web, base+"/groups/"+group+"/reset", reset); res.StatusCode != http.StatusBadRequest || !strings.Contains(body, "active member") {
		t.Fatalf("reset with a member: %d\n%s", res.StatusCode, body)
	}
	member.Close() // leaves the group
	deadline := time.Now().Add(15 * time.Second)
	for {
		if _, body := get(t, web, base+"/groups/"+group); strings.Contains(body, "No members.") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the member is still shown 15 s after it left")
		}
		time.Sleep(100 * time.Millisecond) // polling for the leave to be applied
	}
	// The operator commits an offset for the empty group; the reset may now be previewed.
	offs := kadm.Offsets{}
	offs.AddOffset(topic, 0, 0, -1)
	if err := kadm.NewClient(op).CommitAllOffsets(ctx, group, offs); err != nil {
		t.Fatal(err)
	}
	res, body := post(t, web, base+"/groups/"+group+"/reset", reset)
	if res.StatusCode != http.StatusOK || !strings.Contains(body, `id="preview"`) {
		t.Fatalf("reset preview once the member left: %d\n%s", res.StatusCode, body)
	}
}
