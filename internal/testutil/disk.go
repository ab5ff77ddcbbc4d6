package testutil

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
)

// MountTmpfs mounts a tmpfs of sizeMiB at n.Dir, so that a test can fill the node's log dir
// (FillDisk) without filling the machine's disk. Call it from ClusterOptions.BeforeStart,
// before the node first starts. When the test ends the node is killed (its process holds
// files in the mount) and the tmpfs unmounted. It fails the test with the reason when it
// cannot mount: that needs root and mount(8).
func MountTmpfs(t testing.TB, n *Node, sizeMiB int) {
	t.Helper()
	if n.Running() {
		t.Fatalf("MountTmpfs: node %d is running", n.ID)
	}
	MountTmpfsAt(t, n.Dir, sizeMiB)
	t.Cleanup(n.Kill) // runs before the unmount registered first
}

// MountTmpfsAt mounts a tmpfs of sizeMiB at dir (made if missing) and unmounts it when the
// test ends, after the cleanups registered later (the processes using it). It fails the test
// with the reason when it cannot mount: that needs root and mount(8).
func MountTmpfsAt(t testing.TB, dir string, sizeMiB int) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("mount", "-t", "tmpfs", "-o", fmt.Sprintf("size=%dm", sizeMiB), "tmpfs", dir).CombinedOutput()
	if err != nil {
		t.Fatalf("a tmpfs of its own (needs root and mount(8)): mount -t tmpfs -o size=%dm tmpfs %s: %v: %s", sizeMiB, dir, err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", dir).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v: %s", dir, err, out)
		}
	})
}

// FillDisk writes zeros to a new file in dir until its file system is full (ENOSPC) and
// returns the file's path and size. Removing the file frees the space.
func FillDisk(dir string) (path string, size int64, err error) {
	path = filepath.Join(dir, "filler")
	f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	if err != nil {
		return "", 0, err
	}
	defer f.Close()
	chunk := make([]byte, 1<<20)
	for {
		n, err := f.Write(chunk)
		size += int64(n)
		if errors.Is(err, syscall.ENOSPC) {
			return path, size, nil
		}
		if err != nil {
			return path, size, err
		}
	}
}

// FreeBytes is the space left for files on the file system holding dir.
func FreeBytes(dir string) (int64, error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return 0, err
	}
	return int64(st.Bavail) * int64(st.Bsize), nil
}
