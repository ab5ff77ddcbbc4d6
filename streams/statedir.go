package streams

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// stateDirectory is an App's local state, Kafka Streams' state.dir layout:
//
//	<state.dir>/<application.id>/<task id>/.lock          held while an App runs the task
//	<state.dir>/<application.id>/<task id>/.checkpoint    changelog offsets the stores hold
//	<state.dir>/<application.id>/<task id>/<store>/       one persistent store (pebble)
//
// A task directory is used only under its lock (an exclusive flock of .lock where the
// platform has one), so neither two Apps of one process nor two processes on one state.dir
// open the same stores.
type stateDirectory struct {
	root string // <state.dir>/<application.id>
	// defaultStore is default.dsl.store: the type of a store whose operator chose none.
	defaultStore StoreType
	// eos is exactly_once_v2: a checkpoint is read and removed when a task opens, and
	// written only when it closes cleanly.
	eos bool
	log *slog.Logger
}

// lockWait is how long a task waits for another holder (an App closing it) to release its
// directory before its creation fails.
const lockWait = time.Minute

func (d *stateDirectory) taskDir(id TaskID) string { return filepath.Join(d.root, id.String()) }

// lockTask creates the task's directory and locks it, retrying while another holder has it
// for up to lockWait.
func (d *stateDirectory) lockTask(id TaskID) (*dirLock, error) {
	dir := d.taskDir(id)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("streams: state directory of task %s: %w", id, err)
	}
	deadline := time.Now().Add(lockWait)
	backoff := 10 * time.Millisecond
	for {
		l, err := lockDir(dir)
		if !errors.Is(err, errDirLocked) || time.Now().After(deadline) {
			if err != nil {
				return nil, fmt.Errorf("streams: lock state directory %s: %w", dir, err)
			}
			return l, nil
		}
		time.Sleep(backoff)
		backoff = min(2*backoff, 500*time.Millisecond)
	}
}

// errDirLocked is a task directory another App (of this process or another) holds.
var errDirLocked = errors.New("held by another instance")

// topicPartition names one changelog partition.
type topicPartition struct {
	topic     string
	partition int32
}

// checkpointFile is the name of a task's checkpoint in its directory.
const checkpointFile = ".checkpoint"

// readCheckpoint reads a checkpoint file in Kafka's OffsetCheckpoint format:
//
//	0                          the version
//	<n>                        the number of entries
//	<topic> <partition> <offset>   n lines
//
// An offset is the last changelog offset whose effect the stores hold. A missing file is
// no checkpoint (nil, nil); a malformed one is an error.
func readCheckpoint(path string) (map[topicPartition]int64, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	line := func() (string, bool) {
		if !sc.Scan() {
			return "", false
		}
		return sc.Text(), true
	}
	v, ok := line()
	if !ok || v != "0" {
		return nil, fmt.Errorf("checkpoint %s: version %q, want 0", path, v)
	}
	c, ok := line()
	n, err := strconv.Atoi(c)
	if !ok || err != nil || n < 0 {
		return nil, fmt.Errorf("checkpoint %s: entry count %q", path, c)
	}
	out := make(map[topicPartition]int64, n)
	for i := range n {
		l, ok := line()
		f := strings.Fields(l)
		if !ok || len(f) != 3 {
			return nil, fmt.Errorf("checkpoint %s: entry %d: %q", path, i, l)
		}
		p, perr := strconv.ParseInt(f[1], 10, 32)
		o, oerr := strconv.ParseInt(f[2], 10, 64)
		if perr != nil || oerr != nil {
			return nil, fmt.Errorf("checkpoint %s: entry %d: %q", path, i, l)
		}
		out[topicPartition{f[0], int32(p)}] = o
	}
	if l, ok := line(); ok && strings.TrimSpace(l) != "" {
		return nil, fmt.Errorf("checkpoint %s: %d entries announced, more found", path, n)
	}
	return out, nil
}

// writeCheckpoint replaces the checkpoint at path atomically: it writes a temporary file,
// syncs it, renames it over the old one and syncs the directory.
func writeCheckpoint(path string, offsets map[topicPartition]int64) error {
	var b strings.Builder
	fmt.Fprintf(&b, "0\n%d\n", len(offsets))
	for tp, o := range offsets {
		fmt.Fprintf(&b, "%s %d %d\n", tp.topic, tp.partition, o)
	}
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.WriteString(b.String()); err != nil {
		return errors.Join(err, f.Close())
	}
	if err := f.Sync(); err != nil {
		return errors.Join(err, f.Close())
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		return err
	}
	return syncDir(filepath.Dir(path))
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	return errors.Join(d.Sync(), d.Close())
}

// CleanUp deletes this application's local state, <StateDir>/<ApplicationID>, as Kafka
// Streams' KafkaStreams.cleanUp: the next Run restores every store from its changelog. It
// may be called before Run or after Run has returned; a task directory that another
// instance holds is left, and reported.
func (a *App) CleanUp() error {
	a.runMu.Lock()
	running := a.done != nil
	if running {
		select {
		case <-a.done:
			running = false
		default:
		}
	}
	a.runMu.Unlock()
	if running {
		return errors.New("streams: CleanUp while Run is running")
	}
	root := a.topo.state.root
	entries, err := os.ReadDir(root)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("streams: clean up %s: %w", root, err)
	}
	var errs []error
	for _, e := range entries {
		dir := filepath.Join(root, e.Name())
		if !e.IsDir() {
			errs = append(errs, os.Remove(dir))
			continue
		}
		l, err := lockDir(dir)
		if err != nil {
			errs = append(errs, fmt.Errorf("streams: clean up %s: %w", dir, err))
			continue
		}
		errs = append(errs, os.RemoveAll(dir), l.unlock())
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	return os.Remove(root)
}
