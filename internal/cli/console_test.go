package cli

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"
)

// `gregor console` serves the console for the cluster it is pointed at, says where (-o json),
// and stops when its context ends.
func TestConsoleCommand(t *testing.T) {
	addr := startTestBroker(t)
	root := &cobra.Command{Use: "gregor", SilenceUsage: true, SilenceErrors: true}
	AddCommands(root)
	pr, pw := io.Pipe()
	root.SetOut(pw)
	root.SetErr(io.Discard)
	root.SetArgs([]string{"console", "-b", addr, "--listen", "127.0.0.1:0", "-o", "json"})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		done <- root.ExecuteContext(ctx)
		pw.Close() // the reader below sees the end if the command failed before printing
	}()
	var started struct {
		URL       string   `json:"url"`
		Bootstrap []string `json:"bootstrap_servers"`
	}
	if err := json.NewDecoder(pr).Decode(&started); err != nil {
		t.Fatalf("no JSON from gregor console: %v (%v)", err, <-done)
	}
	go io.Copy(io.Discard, pr) //nolint:errcheck // drains the pipe until it closes
	if len(started.Bootstrap) != 1 || started.Bootstrap[0] != addr || !strings.HasPrefix(started.URL, "http://127.0.0.1:") {
		t.Fatalf("started: %+v", started)
	}
	res, err := (&http.Client{Timeout: 20 * time.Second}).Get(started.URL)
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(res.Body)
	res.Body.Close()
	if err != nil || res.StatusCode != http.StatusOK || !strings.Contains(string(body), `data-broker="`) {
		t.Fatalf("overview: %d %v\n%s", res.StatusCode, err, body)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("gregor console after its context ended: %v", err)
	}
}
