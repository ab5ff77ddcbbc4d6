package console

import (
	"context"
	"fmt"
	"html"
	"net"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/gregor-project/gregor/internal/console"
	"github.com/gregor-project/gregor/internal/testutil"
)

// serveConsole serves a console pointed at addr and returns its base URL.
func serveConsole(t *testing.T, addr string) string {
	t.Helper()
	con, err := console.New(console.Config{Seeds: func() ([]string, error) { return []string{addr}, nil }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(con.Close)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: con.Handler(), ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(ln) //nolint:errcheck // ends with ErrServerClosed at Close
	t.Cleanup(func() { srv.Close() })
	return "http://" + ln.Addr().String()
}

var offsetCell = regexp.MustCompile(`<tr data-key="[^"]*">\s*<td>\d+</td><td>(\d+)</td>`)

// offsetsShown are the offsets of the records a message browser page lists.
func offsetsShown(body string) []int {
	var out []int
	for _, m := range offsetCell.FindAllStringSubmatch(body, -1) {
		n, _ := strconv.Atoi(m[1]) // the pattern matched digits only
		out = append(out, n)
	}
	return out
}

func span(from, to int) []int {
	var out []int
	for i := from; i <= to; i++ {
		out = append(out, i)
	}
	return out
}

// The message browser starts from the newest records, an offset or a time, pages older and
// newer, filters by value, and shows values as hex.
func TestMessageBrowserPaging(t *testing.T) {
	b := testutil.StartBroker(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addr()), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	const topic = "browse"
	if _, err := kadm.NewClient(cl).CreateTopic(ctx, 1, 1, nil, topic); err != nil {
		t.Fatal(err)
	}
	t0 := time.UnixMilli(1_700_000_000_000)
	for i := range 25 {
		rec := &kgo.Record{Topic: topic, Key: []byte(fmt.Sprint("k", i)), Value: []byte(fmt.Sprint("value-", i)), Timestamp: t0.Add(time.Duration(i) * time.Second)}
		if err := cl.ProduceSync(ctx, rec).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	base := serveConsole(t, b.Addr())
	web := &http.Client{Timeout: 20 * time.Second}
	page := func(query string) string {
		t.Helper()
		res, body := get(t, web, base+"/topics/"+topic+"/messages?"+query)
		if res.StatusCode != http.StatusOK {
			t.Fatalf("%s: %d\n%s", query, res.StatusCode, body)
		}
		return body
	}
	link := regexp.MustCompile(`id="older" href="([^"]+)"`)
	body := page("p=0&limit=10")
	if got := offsetsShown(body); fmt.Sprint(got) != fmt.Sprint(span(15, 24)) {
		t.Fatalf("newest 10: %v", got)
	}
	m := link.FindStringSubmatch(body)
	if m == nil {
		t.Fatalf("no older link:\n%s", body)
	}
	res, body := get(t, web, base+html.UnescapeString(m[1]))
	if got := offsetsShown(body); res.StatusCode != http.StatusOK || fmt.Sprint(got) != fmt.Sprint(span(5, 14)) {
		t.Fatalf("older 10: %d %v", res.StatusCode, got)
	}
	if got := offsetsShown(page("p=0&limit=10&from=offset&offset=3")); fmt.Sprint(got) != fmt.Sprint(span(3, 12)) {
		t.Fatalf("from offset 3: %v", got)
	}
	at := strconv.FormatInt(t0.Add(20*time.Second).UnixMilli(), 10)
	if got := offsetsShown(page("p=0&limit=10&from=time&time=" + at)); fmt.Sprint(got) != fmt.Sprint(span(20, 24)) {
		t.Fatalf("from the time of offset 20: %v", got)
	}
	if got := offsetsShown(page("limit=10&from=offset&offset=0&value=value-1")); fmt.Sprint(got) != fmt.Sprint(append([]int{1}, span(10, 18)...)) {
		t.Fatalf("values containing value-1, first 10: %v", got)
	}
	if body := page("p=0&limit=1&fmt=hex"); !strings.Contains(body, "76 61 6c 75 65 2d 32 34") {
		t.Fatalf("value-24 in hex:\n%s", body)
	}
}
