package cli

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/gregor-project/gregor/internal/batch"
	"github.com/gregor-project/gregor/internal/controller/quorum"
	"github.com/gregor-project/gregor/internal/replica"
	"github.com/gregor-project/gregor/internal/storage"
)

// `gregor dump-log FILE...`: kafka-dump-log.sh, offline. Each file is decoded by its name:
// .log (the batches; with --deep-iteration each record; with --print-data-log keys and
// values), .index, .timeindex, .txnindex, .snapshot (producer state) and
// leader-epoch-checkpoint. A directory is checked instead: a partition directory, or a whole
// log dir (every partition in it), has each batch's CRC checked, offsets increasing across
// batches and segments, index entries pointing at the batch they name inside the .log, time
// index entries inside the segment, and its checkpoints readable. The command exits non-zero
// when a check fails. It reads through the broker's own parsers (internal/batch,
// internal/storage, internal/replica) and writes nothing, so it is safe on a live broker's
// files.

func newDumpLogCommand() *cobra.Command {
	var (
		o                          dumpOptions
		files                      []string
		out                        string
		offsetsDecoder, txnDecoder bool
	)
	cmd := &cobra.Command{
		Use:   "dump-log FILE|DIR...",
		Short: "Decode segment, index, snapshot and checkpoint files offline, or check a log dir's integrity (kafka-dump-log.sh)",
		Long: `Decode log files offline, as kafka-dump-log.sh prints them:
  *.log                    record batches (--deep-iteration: every record;
                           --print-data-log: keys and values too, implies --deep-iteration)
  *.index, *.timeindex     the entries, and the sanity check recovery applies
  *.txnindex               the aborted transactions
  *.snapshot               the producer state snapshot (ids, epochs, sequences)
  leader-epoch-checkpoint  epochs and their start offsets
  __cluster_metadata-0/wal-*.log, snap-*.snap
                           the metadata log's records after its snapshot, with offsets
                           (as gregor metadata log)
--offsets-decoder and --transaction-log-decoder decode the records of __consumer_offsets
and __transaction_state segments with Kafka's own record schemas.
A directory (a partition's, or a whole log dir) is checked instead: CRCs, offsets
increasing, index entries pointing at their batch inside the .log, time index entries
inside their segment, checkpoints readable. Problems are printed and the exit status is 1.`,
		SilenceUsage: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			format, err := parseOutput(out)
			if err != nil {
				return err
			}
			args = append(args, files...)
			if len(args) == 0 {
				return errors.New("give at least one file or directory")
			}
			switch {
			case offsetsDecoder:
				o.decode = decodeOffsetsRecord
			case txnDecoder:
				o.decode = decodeTxnLogRecord
			}
			if o.decode != nil {
				o.printData = true
			}
			if o.printData {
				o.deep = true
			}
			return runDumpLog(cmd, format, o, args)
		},
	}
	cmd.Flags().StringSliceVar(&files, "files", nil, "files to decode, comma-separated (kafka-dump-log.sh's form; positional arguments do the same)")
	cmd.Flags().BoolVar(&o.deep, "deep-iteration", false, "decode every record of each batch")
	cmd.Flags().BoolVar(&o.printData, "print-data-log", false, "print record keys and values (implies --deep-iteration)")
	cmd.Flags().BoolVar(&o.indexSanity, "index-sanity-check", false, "for index files, only run the sanity check")
	cmd.Flags().BoolVar(&offsetsDecoder, "offsets-decoder", false, "decode records as __consumer_offsets' offset commits and group metadata (implies --print-data-log)")
	cmd.Flags().BoolVar(&txnDecoder, "transaction-log-decoder", false, "decode records as __transaction_state's transaction metadata (implies --print-data-log)")
	cmd.MarkFlagsMutuallyExclusive("offsets-decoder", "transaction-log-decoder")
	cmd.Flags().StringVarP(&out, "output", "o", outputTable, "output format: table|json")
	return cmd
}

type dumpOptions struct {
	deep, printData, indexSanity bool
	// decode renders a record's key and value (--offsets-decoder, --transaction-log-decoder).
	decode func(key, value []byte) (k, v string)
}

// DumpedFile is one file's contents as `gregor dump-log -o json` prints them.
type DumpedFile struct {
	File      string                     `json:"file"`
	Kind      string                     `json:"kind"`
	Batches   []DumpedBatch              `json:"batches,omitempty"`
	Index     []storage.IndexEntry       `json:"index_entries,omitempty"`
	TimeIndex []storage.TimeIndexEntry   `json:"time_index_entries,omitempty"`
	Aborted   []storage.AbortedTxn       `json:"aborted_transactions,omitempty"`
	Producers []replica.SnapshotProducer `json:"producers,omitempty"`
	Epochs    []storage.EpochEntry       `json:"epochs,omitempty"`
	Problems  []string                   `json:"problems,omitempty"`
	// Check is set for a directory: what its integrity check found.
	Check *DirCheck `json:"check,omitempty"`
	// MetadataRecords are the records of a metadata log WAL file (wal-*.log of
	// __cluster_metadata-0), as `gregor metadata log` prints them.
	MetadataRecords []MetadataRecord `json:"metadata_records,omitempty"`
}

// DumpedBatch is one record batch of a .log.
type DumpedBatch struct {
	BaseOffset           int64          `json:"base_offset"`
	LastOffset           int64          `json:"last_offset"`
	Count                int32          `json:"count"`
	BaseSequence         int32          `json:"base_sequence"`
	LastSequence         int32          `json:"last_sequence"`
	ProducerID           int64          `json:"producer_id"`
	ProducerEpoch        int16          `json:"producer_epoch"`
	PartitionLeaderEpoch int32          `json:"partition_leader_epoch"`
	IsTransactional      bool           `json:"is_transactional"`
	IsControl            bool           `json:"is_control"`
	DeleteHorizonMs      *int64         `json:"delete_horizon_ms"`
	Position             int64          `json:"position"`
	TimestampType        string         `json:"timestamp_type"`
	MaxTimestamp         int64          `json:"max_timestamp"`
	Size                 int            `json:"size"`
	Magic                int8           `json:"magic"`
	Codec                string         `json:"compress_codec"`
	CRC                  uint32         `json:"crc"`
	IsValid              bool           `json:"is_valid"`
	Records              []DumpedRecord `json:"records,omitempty"`
}

// DumpedRecord is one record of a batch (--deep-iteration).
type DumpedRecord struct {
	Offset     int64    `json:"offset"`
	Timestamp  int64    `json:"timestamp"`
	KeySize    int      `json:"key_size"`
	ValueSize  int      `json:"value_size"`
	Sequence   int32    `json:"sequence"`
	HeaderKeys []string `json:"header_keys"`
	Key        *string  `json:"key,omitempty"`
	Payload    *string  `json:"payload,omitempty"`
	// Control records: the marker (COMMIT, ABORT) and its coordinator epoch.
	EndTxnMarker     string `json:"end_txn_marker,omitempty"`
	CoordinatorEpoch *int32 `json:"coordinator_epoch,omitempty"`
}

var codecNames = map[batch.Codec]string{
	batch.CodecNone: "none", batch.CodecGzip: "gzip", batch.CodecSnappy: "snappy", batch.CodecLZ4: "lz4", batch.CodecZstd: "zstd",
}

func runDumpLog(cmd *cobra.Command, format string, o dumpOptions, args []string) error {
	var dumps []DumpedFile
	problems := 0
	w := cmd.OutOrStdout()
	for _, path := range args {
		fi, err := os.Stat(path)
		if err != nil {
			return err
		}
		var d DumpedFile
		if fi.IsDir() {
			d = DumpedFile{File: path, Kind: "dir"}
			c, err := checkDir(path, terminalProgress(cmd))
			if err != nil {
				return err
			}
			d.Check = &c
			problems += c.problemCount()
		} else {
			var emit func(DumpedBatch) error
			if format != outputJSON && strings.HasSuffix(path, storage.LogFileSuffix) && !isMetadataLogFile(path) {
				printDumpHeader(w, path, "log")
				emit = func(b DumpedBatch) error { return printBatch(w, b, o) }
			}
			d, err = dumpFile(path, o, emit)
			if err != nil {
				return err
			}
			problems += len(d.Problems)
			if emit != nil {
				printProblems(w, d.Problems)
				continue
			}
		}
		if format == outputJSON {
			dumps = append(dumps, d)
			continue
		}
		if err := printDump(w, d, o); err != nil {
			return err
		}
	}
	if format == outputJSON {
		if err := writeJSON(w, dumps); err != nil {
			return err
		}
	}
	if problems > 0 {
		return fmt.Errorf("%d problem(s) found", problems)
	}
	return nil
}

// dumpFile decodes one file by its name. The batches of a .log go to emit as they are read
// when it is set (so a large segment is never held whole), else into the result.
func dumpFile(path string, o dumpOptions, emit func(DumpedBatch) error) (DumpedFile, error) {
	name := filepath.Base(path)
	fs := storage.OS
	d := DumpedFile{File: path}
	switch {
	case isMetadataLogFile(path):
		// The metadata log is raft's WAL and snapshots, not Kafka segments: decode the
		// whole directory as `gregor metadata log` does (Kafka's --cluster-metadata-decoder).
		d.Kind = "metadata-log"
		l, err := quorum.ReadOffline(fs, filepath.Dir(path))
		if err != nil {
			return d, err
		}
		d.MetadataRecords = metadataRecords(l, 0, 0)
		if l.TornBytes > 0 {
			d.Problems = append(d.Problems, fmt.Sprintf("%s: %d bytes of a torn write at the end (dropped at the next start)", l.WAL, l.TornBytes))
		}
		return d, nil
	case strings.HasSuffix(name, storage.LogFileSuffix):
		d.Kind = "log"
		if emit == nil {
			emit = func(b DumpedBatch) error { d.Batches = append(d.Batches, b); return nil }
		}
		var err error
		d.Problems, err = readBatches(path, o.deep, o.printData, o.decode, func(b DumpedBatch, _ batch.Header) error { return emit(b) })
		return d, err
	case strings.HasSuffix(name, storage.IndexFileSuffix):
		d.Kind = "offset-index"
		logSize := int64(-1)
		if fi, err := os.Stat(strings.TrimSuffix(path, storage.IndexFileSuffix) + storage.LogFileSuffix); err == nil {
			logSize = fi.Size()
		}
		entries, check, err := storage.ReadOffsetIndex(fs, path, logSize)
		if err != nil {
			return d, err
		}
		d.Index = entries
		if check != nil {
			d.Problems = append(d.Problems, check.Error())
		}
		return d, nil
	case strings.HasSuffix(name, storage.TimeIndexFileSuffix):
		d.Kind = "time-index"
		entries, check, err := storage.ReadTimeIndex(fs, path, -1)
		if err != nil {
			return d, err
		}
		d.TimeIndex = entries
		if check != nil {
			d.Problems = append(d.Problems, check.Error())
		}
		return d, nil
	case strings.HasSuffix(name, storage.TxnIndexFileSuffix):
		d.Kind = "txn-index"
		var err error
		d.Aborted, err = storage.ReadTxnIndex(fs, path)
		return d, err
	case strings.HasSuffix(name, ".snapshot"):
		d.Kind = "producer-snapshot"
		var err error
		d.Producers, err = replica.ReadProducerSnapshot(fs, path)
		return d, err
	case name == storage.LeaderEpochCheckpointFile:
		d.Kind = "leader-epoch-checkpoint"
		var err error
		d.Epochs, err = storage.ReadLeaderEpochCheckpoint(fs, path)
		return d, err
	}
	return d, fmt.Errorf("%s: not a .log, .index, .timeindex, .txnindex, .snapshot or leader-epoch-checkpoint file", path)
}

// isMetadataLogFile reports whether path is a file of the metadata log's directory (its WAL
// or a snapshot), which is not in Kafka's segment format.
func isMetadataLogFile(path string) bool {
	name := filepath.Base(path)
	return filepath.Base(filepath.Dir(path)) == storage.MetadataLogTopic+"-0" &&
		(strings.HasPrefix(name, "wal-") || strings.HasPrefix(name, "snap-"))
}

// readBatches reads the .log at path batch by batch, never more than one batch in memory,
// and hands each to visit with its header. Each batch is CRC-checked; a batch that does not
// parse or fit ends the walk with a problem. It returns the problems found.
func readBatches(path string, deep, printData bool, decode func(k, v []byte) (string, string), visit func(db DumpedBatch, h batch.Header) error) ([]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	size := fi.Size()
	var (
		problems []string
		hdr      [batch.HeaderSize]byte
		buf      []byte
		prevLast int64 = -1
	)
	// Sequential reads through one buffer: a segment of small batches costs a read per
	// megabyte, not two per batch.
	r := bufio.NewReaderSize(f, 1<<20)
	for pos := int64(0); pos < size; {
		if size-pos < batch.HeaderSize {
			problems = append(problems, fmt.Sprintf("%d bytes after the last whole batch at position %d", size-pos, pos))
			break
		}
		if _, err := io.ReadFull(r, hdr[:]); err != nil {
			return problems, err
		}
		h, err := batch.ParseHeader(hdr[:])
		if err != nil {
			problems = append(problems, fmt.Sprintf("position %d: %v", pos, err))
			break
		}
		if int64(h.Size()) > size-pos {
			problems = append(problems, fmt.Sprintf("position %d: batch of %d bytes runs past the end of the file (%d bytes left)", pos, h.Size(), size-pos))
			break
		}
		if cap(buf) < h.Size() {
			buf = make([]byte, h.Size())
		}
		buf = buf[:h.Size()]
		copy(buf, hdr[:])
		if _, err := io.ReadFull(r, buf[batch.HeaderSize:]); err != nil {
			return problems, err
		}
		_, crcErr := batch.CheckCRC(buf)
		db := dumpedBatch(h, pos, crcErr == nil)
		if crcErr != nil {
			problems = append(problems, fmt.Sprintf("position %d: %v", pos, crcErr))
		}
		if h.BaseOffset <= prevLast {
			problems = append(problems, fmt.Sprintf("position %d: base offset %d is not above the previous batch's last offset %d", pos, h.BaseOffset, prevLast))
		}
		prevLast = h.LastOffset()
		if deep && crcErr == nil {
			recs, err := decodeDumpRecords(h, buf, printData, decode)
			if err != nil {
				problems = append(problems, fmt.Sprintf("position %d: records: %v", pos, err))
			}
			db.Records = recs
		}
		if err := visit(db, h); err != nil {
			return problems, err
		}
		pos += int64(h.Size())
	}
	return problems, nil
}

func dumpedBatch(h batch.Header, pos int64, valid bool) DumpedBatch {
	db := DumpedBatch{
		BaseOffset: h.BaseOffset, LastOffset: h.LastOffset(), Count: h.RecordCount,
		BaseSequence: h.BaseSequence, LastSequence: h.LastSequence(), ProducerID: h.ProducerID,
		ProducerEpoch: h.ProducerEpoch, PartitionLeaderEpoch: h.PartitionLeaderEpoch,
		IsTransactional: h.IsTransactional(), IsControl: h.IsControl(), Position: pos,
		TimestampType: "CreateTime", MaxTimestamp: h.MaxTimestamp, Size: h.Size(), Magic: h.Magic,
		Codec: codecNames[h.Codec()], CRC: h.CRC, IsValid: valid,
	}
	if h.Attributes&batch.AttrLogAppendTime != 0 {
		db.TimestampType = "LogAppendTime"
	}
	if ms, ok := h.DeleteHorizonMs(); ok {
		db.DeleteHorizonMs = &ms
	}
	if db.Codec == "" {
		db.Codec = fmt.Sprintf("unknown(%d)", h.Codec())
	}
	return db
}

// decodeDumpRecords decodes a batch's records (decompressing them).
func decodeDumpRecords(h batch.Header, b []byte, printData bool, decode func(k, v []byte) (string, string)) ([]DumpedRecord, error) {
	recs, err := batch.Records(b)
	if err != nil {
		return nil, err
	}
	out := make([]DumpedRecord, 0, len(recs))
	for _, r := range recs {
		dr := DumpedRecord{
			Offset: h.BaseOffset + int64(r.OffsetDelta), Timestamp: h.BaseTimestamp + r.TimestampDelta,
			KeySize: len(r.Key), ValueSize: len(r.Value), Sequence: -1, HeaderKeys: []string{},
		}
		if _, ok := h.DeleteHorizonMs(); ok {
			dr.Timestamp = -1 // the base timestamp is the delete horizon: record times are not kept
		}
		if h.Attributes&batch.AttrLogAppendTime != 0 {
			dr.Timestamp = h.MaxTimestamp
		}
		if r.Key == nil {
			dr.KeySize = -1
		}
		if r.Value == nil {
			dr.ValueSize = -1
		}
		if h.BaseSequence >= 0 {
			dr.Sequence = int32((int64(h.BaseSequence) + int64(r.OffsetDelta)) % (1 << 31))
		}
		for _, hd := range r.Headers {
			dr.HeaderKeys = append(dr.HeaderKeys, hd.Key)
		}
		if h.IsControl() {
			// Control record: key = version int16, type int16 (0 ABORT, 1 COMMIT); value =
			// version int16, coordinatorEpoch int32.
			if len(r.Key) >= 4 {
				switch binary.BigEndian.Uint16(r.Key[2:]) {
				case 0:
					dr.EndTxnMarker = "ABORT"
				case 1:
					dr.EndTxnMarker = "COMMIT"
				default:
					dr.EndTxnMarker = fmt.Sprintf("UNKNOWN(%d)", binary.BigEndian.Uint16(r.Key[2:]))
				}
			}
			if len(r.Value) >= 6 {
				ce := int32(binary.BigEndian.Uint32(r.Value[2:]))
				dr.CoordinatorEpoch = &ce
			}
		} else if decode != nil {
			k, v := decode(r.Key, r.Value)
			dr.Key, dr.Payload = &k, &v
		} else if printData {
			if r.Key != nil {
				k := string(r.Key)
				dr.Key = &k
			}
			if r.Value != nil {
				v := string(r.Value)
				dr.Payload = &v
			}
		}
		out = append(out, dr)
	}
	return out, nil
}

// printDumpHeader starts a file's dump as kafka-dump-log.sh does.
func printDumpHeader(w io.Writer, path, kind string) {
	fmt.Fprintf(w, "Dumping %s\n", path)
	if kind != "log" {
		return
	}
	if base, ok := storage.ParseSegmentFileName(filepath.Base(path), storage.LogFileSuffix); ok {
		fmt.Fprintf(w, "Log starting offset: %d\n", base)
	}
}

// printBatch writes a batch line, and its record lines, as kafka-dump-log.sh does.
func printBatch(w io.Writer, b DumpedBatch, o dumpOptions) error {
	horizon := "OptionalLong.empty"
	if b.DeleteHorizonMs != nil {
		horizon = fmt.Sprintf("OptionalLong[%d]", *b.DeleteHorizonMs)
	}
	if _, err := fmt.Fprintf(w, "baseOffset: %d lastOffset: %d count: %d baseSequence: %d lastSequence: %d producerId: %d producerEpoch: %d partitionLeaderEpoch: %d isTransactional: %t isControl: %t deleteHorizonMs: %s position: %d %s: %d size: %d magic: %d compresscodec: %s crc: %d isvalid: %t\n",
		b.BaseOffset, b.LastOffset, b.Count, b.BaseSequence, b.LastSequence, b.ProducerID, b.ProducerEpoch,
		b.PartitionLeaderEpoch, b.IsTransactional, b.IsControl, horizon, b.Position, b.TimestampType, b.MaxTimestamp,
		b.Size, b.Magic, b.Codec, b.CRC, b.IsValid); err != nil {
		return err
	}
	for _, r := range b.Records {
		line := fmt.Sprintf("| offset: %d %s: %d keySize: %d valueSize: %d sequence: %d headerKeys: [%s]",
			r.Offset, b.TimestampType, r.Timestamp, r.KeySize, r.ValueSize, r.Sequence, strings.Join(r.HeaderKeys, ","))
		if r.EndTxnMarker != "" {
			line += " endTxnMarker: " + r.EndTxnMarker
			if r.CoordinatorEpoch != nil {
				line += fmt.Sprintf(" coordinatorEpoch: %d", *r.CoordinatorEpoch)
			}
		} else if o.printData {
			if r.Key != nil {
				line += " key: " + *r.Key
			}
			if r.Payload != nil {
				line += " payload: " + *r.Payload
			}
		}
		if _, err := fmt.Fprintln(w, line); err != nil {
			return err
		}
	}
	return nil
}

func printProblems(w io.Writer, problems []string) {
	for _, p := range problems {
		fmt.Fprintf(w, "PROBLEM: %s\n", p)
	}
}

// printDump writes one file's dump as kafka-dump-log.sh does.
func printDump(w io.Writer, d DumpedFile, o dumpOptions) error {
	if d.Check != nil {
		return printDirCheck(w, *d.Check)
	}
	printDumpHeader(w, d.File, d.Kind)
	switch d.Kind {
	case "log":
		for _, b := range d.Batches {
			if err := printBatch(w, b, o); err != nil {
				return err
			}
		}
	case "offset-index":
		if !o.indexSanity {
			for _, e := range d.Index {
				fmt.Fprintf(w, "offset: %d position: %d\n", e.Offset, e.Position)
			}
		}
		if o.indexSanity && len(d.Problems) == 0 {
			fmt.Fprintf(w, "%s passed sanity check.\n", d.File)
		}
	case "time-index":
		if !o.indexSanity {
			for _, e := range d.TimeIndex {
				fmt.Fprintf(w, "timestamp: %d offset: %d\n", e.Timestamp, e.Offset)
			}
		}
		if o.indexSanity && len(d.Problems) == 0 {
			fmt.Fprintf(w, "%s passed sanity check.\n", d.File)
		}
	case "txn-index":
		for _, a := range d.Aborted {
			fmt.Fprintf(w, "version: 0 producerId: %d firstOffset: %d lastOffset: %d lastStableOffset: %d\n", a.ProducerID, a.FirstOffset, a.LastOffset, a.LastStableOffset)
		}
	case "producer-snapshot":
		for _, p := range d.Producers {
			txn := "None"
			if p.TxnFirstOffset >= 0 {
				txn = fmt.Sprint(p.TxnFirstOffset)
			}
			line := fmt.Sprintf("producerId: %d producerEpoch: %d coordinatorEpoch: %d currentTxnFirstOffset: %s lastTimestamp: %d",
				p.ProducerID, p.Epoch, p.CoordinatorEpoch, txn, p.LastTimestamp)
			if n := len(p.Batches); n > 0 {
				last := p.Batches[n-1]
				line += fmt.Sprintf(" firstSequence: %d lastSequence: %d lastOffset: %d offsetDelta: %d",
					last.FirstSeq, last.LastSeq, last.LastOffset, last.LastOffset-last.FirstOffset)
			}
			fmt.Fprintln(w, line)
		}
	case "leader-epoch-checkpoint":
		for _, e := range d.Epochs {
			fmt.Fprintf(w, "epoch: %d startOffset: %d\n", e.Epoch, e.StartOffset)
		}
	case "metadata-log":
		if err := printMetadataRecords(w, d.MetadataRecords); err != nil {
			return err
		}
	}
	printProblems(w, d.Problems)
	return nil
}
