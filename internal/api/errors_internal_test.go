package api

import (
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/gregor-project/gregor/internal/authz"
	"github.com/gregor-project/gregor/internal/batch"
	"github.com/gregor-project/gregor/internal/config"
	"github.com/gregor-project/gregor/internal/controller/client"
	"github.com/gregor-project/gregor/internal/controller/quorum"
	"github.com/gregor-project/gregor/internal/controller/state"
	"github.com/gregor-project/gregor/internal/fetchsession"
	"github.com/gregor-project/gregor/internal/group"
	"github.com/gregor-project/gregor/internal/metadata"
	"github.com/gregor-project/gregor/internal/replica"
	"github.com/gregor-project/gregor/internal/security"
	"github.com/gregor-project/gregor/internal/share"
	"github.com/gregor-project/gregor/internal/storage"
	"github.com/gregor-project/gregor/internal/txn"
	"github.com/gregor-project/gregor/internal/wire"
)

// sentinelCode is the Kafka error code a client gets for a sentinel error, or, for one that
// never reaches this boundary, why not.
type sentinelCode struct {
	err   error
	want  *kerr.Error // nil: UNKNOWN_SERVER_ERROR is Kafka's answer too (no error code of its own)
	never string      // set: code() is never given this error; the reason
}

// sentinels is every exported Err* variable of the broker's packages, by "dir.Name" (dir
// relative to internal/), with the code Kafka sends for the same condition.
var sentinels = map[string]sentinelCode{
	"authz.ErrInvalidBinding":   {err: authz.ErrInvalidBinding, want: kerr.InvalidRequest},
	"authz.ErrInvalidFilter":    {err: authz.ErrInvalidFilter, want: kerr.InvalidRequest},
	"authz.ErrInvalidPrincipal": {err: authz.ErrInvalidPrincipal, want: kerr.InvalidRequest},

	"batch.ErrCorrupt":          {err: batch.ErrCorrupt, want: kerr.CorruptMessage},
	"batch.ErrBadCRC":           {err: batch.ErrBadCRC, want: kerr.CorruptMessage},
	"batch.ErrUnsupportedMagic": {err: batch.ErrUnsupportedMagic, want: kerr.UnsupportedForMessageFormat},
	"batch.ErrUnknownCodec":     {err: batch.ErrUnknownCodec, want: kerr.UnsupportedCompressionType},
	"batch.ErrInvalidRecord":    {err: batch.ErrInvalidRecord, want: kerr.InvalidRecord},

	"config.ErrUnknownConfig": {err: config.ErrUnknownConfig, want: kerr.InvalidConfig},
	"config.ErrInvalidConfig": {err: config.ErrInvalidConfig, want: kerr.InvalidConfig},

	"controller/client.ErrNoController":  {err: client.ErrNoController, want: kerr.NotController},
	"controller/quorum.ErrNotController": {err: quorum.ErrNotController, want: kerr.NotController},
	"controller/quorum.ErrStopped":       {err: quorum.ErrStopped, never: "the controller's own request handlers answer it; a broker's forward of an unanswered request is REQUEST_TIMED_OUT"},
	"controller/quorum.ErrCompacted":     {err: quorum.ErrCompacted, never: "raft's log reads between controllers"},
	"controller/quorum.ErrCorruptLog":    {err: quorum.ErrCorruptLog, never: "a controller's raft log at start-up: the process stops"},
	"controller/state.ErrRecordRejected": {err: state.ErrRecordRejected, never: "the metadata state machine skips the record; no request waits on it"},
	"controller/state.ErrCorruptRecord":  {err: state.ErrCorruptRecord, never: "decoding the metadata log: the publisher stops"},

	"fetchsession.ErrSessionNotFound": {err: fetchsession.ErrSessionNotFound, want: kerr.FetchSessionIDNotFound},
	"fetchsession.ErrInvalidEpoch":    {err: fetchsession.ErrInvalidEpoch, want: kerr.InvalidFetchSessionEpoch},
	"fetchsession.ErrTopicIDMismatch": {err: fetchsession.ErrTopicIDMismatch, want: kerr.FetchSessionTopicIDError},

	"group.ErrUnknownRecord": {err: group.ErrUnknownRecord, never: "replaying __consumer_offsets: the loader skips the record"},
	"group.ErrCorruptRecord": {err: group.ErrCorruptRecord, never: "replaying __consumer_offsets: the loader skips the record"},
	"txn.ErrUnknownRecord":   {err: txn.ErrUnknownRecord, never: "replaying __transaction_state: the loader skips the record"},
	"txn.ErrCorruptRecord":   {err: txn.ErrCorruptRecord, never: "replaying __transaction_state: the loader skips the record"},

	"metadata.ErrTopicExists":  {err: metadata.ErrTopicExists, want: kerr.TopicAlreadyExists},
	"metadata.ErrUnknownTopic": {err: metadata.ErrUnknownTopic, want: kerr.UnknownTopicOrPartition},
	"metadata.ErrPartitions":   {err: metadata.ErrPartitions, want: kerr.InvalidPartitions},

	"replica.ErrFencedLeaderEpoch":            {err: replica.ErrFencedLeaderEpoch, want: kerr.FencedLeaderEpoch},
	"replica.ErrUnknownLeaderEpoch":           {err: replica.ErrUnknownLeaderEpoch, want: kerr.UnknownLeaderEpoch},
	"replica.ErrNotEnoughReplicas":            {err: replica.ErrNotEnoughReplicas, want: kerr.NotEnoughReplicas},
	"replica.ErrNotEnoughReplicasAfterAppend": {err: replica.ErrNotEnoughReplicasAfterAppend, want: kerr.NotEnoughReplicasAfterAppend},
	"replica.ErrNotLeaderOrFollower":          {err: replica.ErrNotLeaderOrFollower, want: kerr.NotLeaderForPartition},
	"replica.ErrOutOfOrderSequence":           {err: replica.ErrOutOfOrderSequence, want: kerr.OutOfOrderSequenceNumber},
	"replica.ErrInvalidEpoch":                 {err: replica.ErrInvalidEpoch, want: kerr.InvalidProducerEpoch},
	"replica.ErrTransactionCoordinatorFenced": {err: replica.ErrTransactionCoordinatorFenced, want: kerr.TransactionCoordinatorFenced},
	"replica.ErrInvalidTxnState":              {err: replica.ErrInvalidTxnState, want: kerr.InvalidTxnState},
	"replica.ErrRequestTimedOut":              {err: replica.ErrRequestTimedOut, want: kerr.RequestTimedOut},
	"replica.ErrPolicyViolation":              {err: replica.ErrPolicyViolation, want: kerr.PolicyViolation},

	"security.ErrAuthentication":    {err: security.ErrAuthentication, want: kerr.SaslAuthenticationFailed},
	"security.ErrNoPeerCertificate": {err: security.ErrNoPeerCertificate, never: "raft peers between controllers, refused at their TLS handshake"},
	"security.ErrPeerNotSuperUser":  {err: security.ErrPeerNotSuperUser, never: "raft peers between controllers, refused at their TLS handshake"},

	"share.ErrInvalidRecordState": {err: share.ErrInvalidRecordState, want: kerr.InvalidRecordState},
	"share.ErrInvalidAck":         {err: share.ErrInvalidAck, want: kerr.InvalidRequest},
	"share.ErrInvalidMember":      {err: share.ErrInvalidMember, want: kerr.InvalidRequest},
	"share.ErrAckOnOpen":          {err: share.ErrAckOnOpen, want: kerr.InvalidRequest},
	"share.ErrUnknownMember":      {err: share.ErrUnknownMember, want: kerr.UnknownMemberID},
	"share.ErrFencedEpoch":        {err: share.ErrFencedEpoch, want: kerr.FencedMemberEpoch},
	"share.ErrGroupNotEmpty":      {err: share.ErrGroupNotEmpty, want: kerr.NonEmptyGroup},
	"share.ErrNoGroup":            {err: share.ErrNoGroup, want: kerr.GroupIDNotFound},
	"share.ErrSessionNotFound":    {err: share.ErrSessionNotFound, want: kerr.ShareSessionNotFound},
	"share.ErrSessionEpoch":       {err: share.ErrSessionEpoch, want: kerr.InvalidShareSessionEpoch},

	"storage.ErrAlreadyFormatted":    {err: storage.ErrAlreadyFormatted, never: "gregor storage format, offline; the broker never formats a dir it serves"},
	"storage.ErrLogOffline":          {err: storage.ErrLogOffline, want: kerr.KafkaStorageError},
	"storage.ErrLogDirOffline":       {err: storage.ErrLogDirOffline, want: kerr.KafkaStorageError},
	"storage.ErrLogClosed":           {err: storage.ErrLogClosed, want: kerr.NotLeaderForPartition},
	"storage.ErrOffsetOutOfRange":    {err: storage.ErrOffsetOutOfRange, want: kerr.OffsetOutOfRange},
	"storage.ErrOffsetOutOfOrder":    {err: storage.ErrOffsetOutOfOrder}, // Kafka's OffsetsOutOfOrderException has no code
	"storage.ErrRecordBatchTooLarge": {err: storage.ErrRecordBatchTooLarge, want: kerr.RecordListTooLarge},
	"storage.ErrInvalidBatch":        {err: storage.ErrInvalidBatch, want: kerr.CorruptMessage},
	"storage.ErrCorruptLog":          {err: storage.ErrCorruptLog, want: kerr.CorruptMessage},
	"storage.ErrTooManyOpenFiles":    {err: storage.ErrTooManyOpenFiles, want: kerr.KafkaStorageError},
	"storage.ErrCleaningAborted":     {err: storage.ErrCleaningAborted, never: "the log cleaner's own passes; it retries"},
	"storage.ErrInvalidEpochEntry":   {err: storage.ErrInvalidEpochEntry}, // a broken invariant: Kafka's IllegalArgumentException
	"storage.ErrMetaMismatch":        {err: storage.ErrMetaMismatch, never: "meta.properties at start-up: the broker does not start"},
	"storage.ErrInjected":            {err: storage.ErrInjected, want: kerr.KafkaStorageError},
	"storage.ErrLogDirNotFound":      {err: storage.ErrLogDirNotFound, want: kerr.LogDirNotFound},
	"storage.ErrNoPartition":         {err: storage.ErrNoPartition, want: kerr.NotLeaderForPartition},
	"storage.ErrDuplicateLog":        {err: storage.ErrDuplicateLog, never: "log dirs at start-up: the broker does not start"},

	"wire.ErrClosed": {err: wire.ErrClosed, want: kerr.NetworkException},
}

// Every exported sentinel error of the broker's packages has an entry in sentinels, found by
// parsing the packages' sources, so that a new sentinel without a Kafka code fails here; and
// code() gives each the code Kafka sends for the same condition, also when wrapped.
func TestEverySentinelHasKafkasCode(t *testing.T) {
	found := exportedSentinels(t, "..")
	for _, name := range found {
		if _, ok := sentinels[name]; !ok {
			t.Errorf("%s has no entry in sentinels: add the Kafka error code it must reach clients as (and map it in code())", name)
		}
	}
	for name, s := range sentinels {
		if !slices.Contains(found, name) {
			t.Errorf("sentinels names %s, which the sources no longer declare", name)
			continue
		}
		if s.never != "" {
			continue
		}
		want := kerr.UnknownServerError.Code
		if s.want != nil {
			want = s.want.Code
		}
		for _, err := range []error{s.err, fmt.Errorf("partition t-0: %w", s.err)} {
			if got := code(err); got != want {
				t.Errorf("%s (%v): code %v, want %v", name, err, kerr.ErrorForCode(got), kerr.ErrorForCode(want))
			}
		}
	}
	// Wrapping: what the storage layer wraps decides the code, not what it found inside (a
	// stored batch the record parser refuses is a corrupt message, not the client's invalid
	// record).
	for _, c := range []struct {
		err  error
		want *kerr.Error
	}{
		{fmt.Errorf("%w: segment 0 at position 12: %w", storage.ErrCorruptLog, batch.ErrInvalidRecord), kerr.CorruptMessage},
		{fmt.Errorf("%w: batch 0 at byte 0: %w", storage.ErrInvalidBatch, batch.ErrCorrupt), kerr.CorruptMessage},
		{fmt.Errorf("%w: %w", storage.ErrLogOffline, syscall.ENOSPC), kerr.KafkaStorageError},
		{&fs.PathError{Op: "write", Path: "t-0/00000000000000000000.log", Err: syscall.EIO}, kerr.KafkaStorageError},
		{errors.New("something else"), kerr.UnknownServerError},
	} {
		if got := code(c.err); got != c.want.Code {
			t.Errorf("%v: code %v, want %v", c.err, kerr.ErrorForCode(got), c.want)
		}
	}
}

// exportedSentinels parses every non-test Go file under root (internal/) and returns the
// package-level exported variables named Err*, as "dir.Name".
func exportedSentinels(t *testing.T, root string) []string {
	t.Helper()
	var out []string
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if d.Name() == "testdata" || d.Name() == "testutil" {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		f, err := parser.ParseFile(fset, path, src, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		dir, err := filepath.Rel(root, filepath.Dir(path))
		if err != nil {
			return err
		}
		for _, decl := range f.Decls {
			gd, ok := decl.(*ast.GenDecl)
			if !ok || gd.Tok != token.VAR {
				continue
			}
			for _, spec := range gd.Specs {
				for _, n := range spec.(*ast.ValueSpec).Names {
					if strings.HasPrefix(n.Name, "Err") && n.IsExported() {
						out = append(out, filepath.ToSlash(dir)+"."+n.Name)
					}
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(out) < 40 {
		t.Fatalf("found only %d sentinels under %s: %v", len(out), root, out)
	}
	return out
}
