package soak

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/gregor-project/gregor/internal/testutil"
)

// usage is one process's resources as /proc shows them.
type usage struct {
	FDs     int   // open descriptors (/proc/<pid>/fd)
	RSSKiB  int64 // resident set (VmRSS of /proc/<pid>/status)
	AnonKiB int64 // of which anonymous memory: the heap, stacks (RssAnon)
	FileKiB int64 // of which mapped file pages: the mmapped indexes (RssFile)
	ShmKiB  int64 // of which shared memory: mmapped files on a tmpfs (RssShmem)
}

func (u usage) String() string {
	return fmt.Sprintf("%d fds, RSS %.1f MiB (anon %.1f, file %.1f, shmem %.1f)", u.FDs, mib(u.RSSKiB), mib(u.AnonKiB), mib(u.FileKiB), mib(u.ShmKiB))
}

func mib(kib int64) float64 {
	return float64(kib) / 1024
}

// sample reads the resources of process pid.
func sample(pid int) (usage, error) {
	if pid == 0 {
		return usage{}, errors.New("not running")
	}
	fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		return usage{}, err
	}
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return usage{}, err
	}
	defer f.Close()
	u := usage{FDs: len(fds), RSSKiB: -1}
	fields := map[string]*int64{"VmRSS:": &u.RSSKiB, "RssAnon:": &u.AnonKiB, "RssFile:": &u.FileKiB, "RssShmem:": &u.ShmKiB}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// "VmRSS:	   12345 kB"
		name, v, _ := strings.Cut(sc.Text(), "\t")
		if p := fields[name]; p != nil {
			*p, err = strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			if err != nil {
				return usage{}, fmt.Errorf("%s %q: %w", name, v, err)
			}
		}
	}
	if err := sc.Err(); err != nil {
		return usage{}, err
	}
	if u.RSSKiB < 0 {
		return usage{}, fmt.Errorf("no VmRSS in /proc/%d/status", pid)
	}
	return u, nil
}

// sampleAll samples every node of the cluster, by id; a node not running
// is left out.
func sampleAll(c *testutil.Cluster) map[int32]usage {
	out := map[int32]usage{}
	for _, n := range c.Nodes() {
		if u, err := sample(n.Pid()); err == nil {
			out[n.ID] = u
		}
	}
	return out
}
