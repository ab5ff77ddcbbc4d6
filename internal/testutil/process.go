package testutil

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gregor-project/gregor/internal/lowport"
)

var build struct {
	once sync.Once
	path string
	err  error
}

// Binary builds cmd/gregor once per test process and returns its path.
func Binary(t testing.TB) string {
	t.Helper()
	build.once.Do(func() {
		_, file, _, _ := runtime.Caller(0)
		root := filepath.Join(filepath.Dir(file), "..", "..")
		removeStaleBinaries()
		dir, err := os.MkdirTemp("", "gregor-bin-")
		if err != nil {
			build.err = err
			return
		}
		build.path = filepath.Join(dir, "gregor")
		cmd := exec.Command("go", "build", "-o", build.path, "./cmd/gregor")
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			build.err = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if build.err != nil {
		t.Fatal(build.err)
	}
	return build.path
}

// removeStaleBinaries deletes the binaries earlier test processes built (a test process
// cannot remove its own at exit): those older than an hour, which no running test uses.
func removeStaleBinaries() {
	old, _ := filepath.Glob(filepath.Join(os.TempDir(), "gregor-bin-*"))
	for _, d := range old {
		if fi, err := os.Stat(d); err == nil && time.Since(fi.ModTime()) > time.Hour {
			os.RemoveAll(d)
		}
	}
}

// FreePort returns a loopback port that was free a moment ago.
func FreePort(t testing.TB) int {
	t.Helper()
	l, err := lowport.Listen()
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// Process is a broker running as its own OS process.
type Process struct {
	Addr   string
	Dir    string
	cmd    *exec.Cmd
	exited chan struct{} // closed when the process has exited; err is then set
	err    error
	t      testing.TB
}

// StartProcess runs `gregor server` on 127.0.0.1:port with data in dir and waits until it
// logs that it is serving.
func StartProcess(t testing.TB, dir string, port int, sets ...string) *Process {
	t.Helper()
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	args := []string{"server", "--set", "log.dirs=" + dir, "--set", "listeners=PLAINTEXT://" + addr, "--set", "http.listener=127.0.0.1:0"}
	for _, s := range sets {
		args = append(args, "--set", s)
	}
	cmd := exec.Command(Binary(t), args...)
	dieWithTest(cmd)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &Process{Addr: addr, Dir: dir, cmd: cmd, exited: make(chan struct{}), t: t}
	started := make(chan struct{})
	var logTail []string
	var mu sync.Mutex
	go func() {
		sc := bufio.NewScanner(stderr)
		once := sync.Once{}
		for sc.Scan() {
			line := sc.Text()
			mu.Lock()
			logTail = append(logTail, line)
			if len(logTail) > 50 {
				logTail = logTail[1:]
			}
			mu.Unlock()
			if os.Getenv("GREGOR_TEST_LOG") != "" {
				fmt.Fprintln(os.Stderr, "[broker]", line)
			}
			if strings.Contains(line, "gregor started") {
				once.Do(func() { close(started) })
			}
		}
		p.err = cmd.Wait()
		close(p.exited)
	}()
	t.Cleanup(func() { p.Kill() })
	select {
	case <-started:
		return p
	case <-p.exited:
		mu.Lock()
		defer mu.Unlock()
		t.Fatalf("broker exited during start-up: %v\n%s", p.err, strings.Join(logTail, "\n"))
	case <-time.After(60 * time.Second):
		t.Fatal("broker did not start within 60s")
	}
	return nil
}

// Exited reports whether the process has exited, and then how (nil: exit status 0).
func (p *Process) Exited() (bool, error) {
	select {
	case <-p.exited:
		return true, p.err
	default:
		return false, nil
	}
}

// Pid is the broker process's id (for reading its /proc entries).
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// Kill sends SIGKILL and waits for the process to die.
func (p *Process) Kill() {
	select {
	case <-p.exited:
		return
	default:
	}
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		p.t.Logf("kill: %v", err)
	}
	<-p.exited
}

// Stop sends SIGTERM and waits for the exit status.
func (p *Process) Stop() error {
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		return err
	}
	select {
	case <-p.exited:
		return p.err
	case <-time.After(60 * time.Second):
		return fmt.Errorf("broker did not stop within 60s of SIGTERM")
	}
}
