package main

import (
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
)

// --pprof-addr serves the runtime profiles, so a running broker can be profiled.
func TestServePprof(t *testing.T) {
	addr, err := servePprof("127.0.0.1:0", slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.Get("http://" + addr + "/debug/pprof/heap?debug=1")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(b), "heap profile") {
		t.Fatalf("status %d, body %.200q", resp.StatusCode, b)
	}
}
