package storage

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
)

// Logs open outside the manager's lock: many goroutines opening the same partitions at once
// all get the one log of each, and a Delete that meets an opening waits for it, then removes
// the directory it created.
func TestManagerConcurrentGetOrCreate(t *testing.T) {
	dir := t.TempDir()
	m, err := OpenManager(OS, dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	const parts, callers = 40, 4
	got := make([][callers]*Log, parts)
	var wg sync.WaitGroup
	for p := range parts {
		for c := range callers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				l, err := m.GetOrCreate("c", int32(p), testCfg())
				if err != nil {
					t.Error(err)
					return
				}
				got[p][c] = l
			}()
		}
	}
	// Deletes of partitions being opened: each waits for the opening, then removes it.
	for p := range 5 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := m.Delete("c", int32(100+p)); err != nil {
				t.Error(err)
			}
		}()
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := m.GetOrCreate("c", int32(100+p), testCfg()); err != nil && err != ErrLogClosed {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	for p := range parts {
		for c := 1; c < callers; c++ {
			if got[p][c] != got[p][0] {
				t.Fatalf("partition %d: callers got different logs", p)
			}
		}
		if m.Get("c", int32(p)) != got[p][0] {
			t.Fatalf("partition %d: the manager holds another log", p)
		}
		if _, err := os.Stat(filepath.Join(dir, fmt.Sprintf("c-%d", p))); err != nil {
			t.Fatal(err)
		}
	}
}
