package console

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/gregor-project/gregor/internal/testutil"
)

// The topic list searches by name (any case); the topic page alters configs and adds partitions, showing Kafka's error for a value or a
// count the broker refuses and the change for one it accepts.
func TestTopicPageActions(t *testing.T) {
	b := testutil.StartBroker(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addr()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	const topic = "actions"
	if _, err := adm.CreateTopic(ctx, 2, 1, nil, topic); err != nil {
		t.Fatal(err)
	}
	base := serveConsole(t, b.Addr())
	web := &http.Client{Timeout: 20 * time.Second}
	if _, body := get(t, web, base+"/topics?q=ACT"); !strings.Contains(body, `data-topic="actions"`) {
		t.Fatalf("searching ACT does not list actions:\n%s", body)
	}
	if _, body := get(t, web, base+"/topics?q=zzz"); strings.Contains(body, `data-topic="actions"`) {
		t.Fatalf("searching zzz lists actions:\n%s", body)
	}
	act := func(path string, form url.Values, status int, want string) string {
		t.Helper()
		res, body := post(t, web, base+"/topics/"+topic+path, form)
		if res.StatusCode != status || !strings.Contains(body, want) {
			t.Fatalf("%s %v: %d, want %d with %q\n%s", path, form, res.StatusCode, status, want, body)
		}
		return body
	}
	act("/configs", url.Values{"configs": {"retention.ms=soon"}}, http.StatusBadRequest, "INVALID_CONFIG")
	act("/configs", url.Values{"configs": {"no.such.config=1"}}, http.StatusBadRequest, "INVALID_CONFIG")
	body := act("/configs", url.Values{"configs": {"retention.ms=120000"}}, http.StatusOK, "configs altered")
	if !strings.Contains(body, `<tr data-config="retention.ms"><td>retention.ms</td><td>120000</td><td>topic</td></tr>`) {
		t.Fatalf("retention.ms not shown as the topic's:\n%s", body)
	}
	act("/partitions", url.Values{"count": {"1"}}, http.StatusBadRequest, "INVALID_PARTITIONS")
	act("/partitions", url.Values{"count": {"4"}}, http.StatusOK, "partitions added")
	md, err := adm.Metadata(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(md.Topics[topic].Partitions); n != 4 {
		t.Fatalf("%d partitions after adding to 4", n)
	}
}
