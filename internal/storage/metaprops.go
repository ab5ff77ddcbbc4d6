package storage

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// ErrMetaMismatch: meta.properties names another cluster or node than the one asked for
// (INCONSISTENT_CLUSTER_ID at startup).
var ErrMetaMismatch = errors.New("storage: meta.properties does not match")

// metaProperties is meta.properties, a Java properties file. Version 1 (KRaft) has cluster.id
// and node.id, and since KIP-858 directory.id, the log dir's own id (a Kafka Uuid in URL-safe
// base64, unique among the node's dirs); version 0 (ZooKeeper) named the node broker.id.
type metaProperties struct {
	version   int
	clusterID string
	nodeID    int32
	dirID     DirID // zero when the file has no directory.id (written before KIP-858)
}

func readMetaProperties(fs FS, dir string) (metaProperties, bool, error) {
	path := filepath.Join(dir, MetaPropertiesFile)
	f, err := fs.OpenFile(path, os.O_RDONLY, 0)
	if errors.Is(err, os.ErrNotExist) {
		return metaProperties{}, false, nil
	} else if err != nil {
		return metaProperties{}, false, err
	}
	data, err := readAll(f)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return metaProperties{}, false, err
	}
	props := parseProperties(data)
	mp := metaProperties{version: -1, nodeID: -1, clusterID: props["cluster.id"]}
	bad := func(key string) error {
		return fmt.Errorf("storage: %s: bad %s %q", path, key, props[key])
	}
	v, err := strconv.Atoi(props["version"])
	if err != nil || (v != 0 && v != 1) {
		return mp, false, bad("version")
	}
	mp.version = v
	key := "node.id"
	if v == 0 {
		key = "broker.id"
	}
	if s, ok := props[key]; ok {
		n, err := strconv.ParseInt(s, 10, 32)
		if err != nil || n < 0 {
			return mp, false, bad(key)
		}
		mp.nodeID = int32(n)
	} else if v == 1 {
		return mp, false, bad(key)
	}
	if v == 1 && mp.clusterID == "" {
		return mp, false, bad("cluster.id")
	}
	if s, ok := props["directory.id"]; ok {
		id, err := ParseDirID(s)
		if err != nil {
			return mp, false, bad("directory.id")
		}
		mp.dirID = id
	}
	return mp, true, nil
}

// parseProperties reads key=value (or key:value) lines, skipping # and ! comments. Escapes
// and continuation lines are not needed for the keys written here.
func parseProperties(data []byte) map[string]string {
	m := make(map[string]string)
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' || line[0] == '!' {
			continue
		}
		i := strings.IndexAny(line, "=:")
		if i < 0 {
			m[line] = ""
			continue
		}
		m[strings.TrimSpace(line[:i])] = strings.TrimSpace(line[i+1:])
	}
	return m
}

func writeMetaProperties(fs FS, dir string, mp metaProperties) error {
	var b bytes.Buffer
	fmt.Fprintf(&b, "#\n#%s\n", time.Now().UTC().Format(time.UnixDate))
	fmt.Fprintf(&b, "cluster.id=%s\n", mp.clusterID)
	if !mp.dirID.IsZero() {
		fmt.Fprintf(&b, "directory.id=%s\n", mp.dirID)
	}
	fmt.Fprintf(&b, "node.id=%d\nversion=1\n", mp.nodeID)
	return WriteFileAtomic(fs, dir, MetaPropertiesFile, b.Bytes())
}

// FormatMetadataDir checks or writes meta.properties in dir, a metadata.log.dir outside
// log.dirs (which Kafka formats like a log dir): a formatted dir must name clusterID and
// nodeID (ErrMetaMismatch); an unformatted one, or one without a directory.id, is written
// with a new directory id.
func FormatMetadataDir(fs FS, dir, clusterID string, nodeID int32) error {
	if err := fs.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	mp, ok, err := readMetaProperties(fs, dir)
	if err != nil {
		return err
	}
	if ok && (mp.clusterID != clusterID || mp.nodeID != nodeID) {
		return fmt.Errorf("%w: %s has cluster.id %q node.id %d, expected %q %d", ErrMetaMismatch,
			dir, mp.clusterID, mp.nodeID, clusterID, nodeID)
	}
	if ok && !mp.dirID.IsZero() {
		return nil
	}
	id, err := NewDirID()
	if err != nil {
		return err
	}
	return writeMetaProperties(fs, dir, metaProperties{version: 1, clusterID: clusterID, nodeID: nodeID, dirID: id})
}
