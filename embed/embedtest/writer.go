package embedtest

import (
	"strings"
	"sync"
	"testing"
)

// tbWriter writes each log line to a test's log until stop.
//
// Lock rule: mu guards done; Write holds it while logging, so no line is logged after stop
// returns.
type tbWriter struct {
	t  testing.TB
	mu sync.Mutex
	// done is set by stop, at the test's cleanup.
	done bool
}

func (w *tbWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.done {
		w.t.Log(strings.TrimRight(string(p), "\n"))
	}
	return len(p), nil
}

func (w *tbWriter) stop() {
	w.mu.Lock()
	w.done = true
	w.mu.Unlock()
}
