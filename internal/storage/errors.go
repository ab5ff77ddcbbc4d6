package storage

import "errors"

// Sentinel errors. The api layer maps them to Kafka error codes (noted beside each); errors
// returned by this package wrap one of them or an I/O error.
var (
	// ErrLogOffline: an earlier write, fsync or truncate failed, so the log may not match what
	// its readers were told; every later call fails. KAFKA_STORAGE_ERROR.
	ErrLogOffline = errors.New("storage: log is offline after an I/O error")
	// ErrLogClosed: the log was closed or deleted. NOT_LEADER_OR_FOLLOWER.
	ErrLogClosed = errors.New("storage: log is closed")
	// ErrOffsetOutOfRange: a read below the log start offset or past the log end offset, or a
	// log start offset past the high watermark. OFFSET_OUT_OF_RANGE.
	ErrOffsetOutOfRange = errors.New("storage: offset out of range")
	// ErrOffsetOutOfOrder: an append without AssignOffsets whose first batch starts below the
	// log end offset, or whose batches' offsets do not increase. UNKNOWN_SERVER_ERROR (the
	// replica fetcher truncates and retries).
	ErrOffsetOutOfOrder = errors.New("storage: batch offsets out of order")
	// ErrRecordBatchTooLarge: one batch is larger than segment.bytes. RECORD_LIST_TOO_LARGE.
	ErrRecordBatchTooLarge = errors.New("storage: record batch larger than the segment size")
	// ErrInvalidBatch: the bytes given to Append are not whole v2 batches. CORRUPT_MESSAGE.
	ErrInvalidBatch = errors.New("storage: malformed record batches")
	// ErrCorruptLog: a batch stored in a segment does not parse (the disk changed under us).
	// CORRUPT_MESSAGE, as Kafka answers a CorruptRecordException met reading a segment.
	ErrCorruptLog = errors.New("storage: corrupt data in a log segment")
	// ErrTooManyOpenFiles: a segment file had to be opened, but every descriptor the
	// FileCache may use is held by a read or write in progress (or the process is at its
	// limit). Nothing was written and the log stays online; the request may be retried.
	// KAFKA_STORAGE_ERROR (retriable for clients).
	ErrTooManyOpenFiles = errors.New("storage: no file descriptor left for a segment file")
	// ErrCleaningAborted: a cleaning pass was given up because the segments it was replacing
	// changed (retention, truncation) or the log was closed; nothing of the group it was on
	// was changed, and the next pass starts again from the checkpointed offset. Never sent to
	// a client (the cleaner retries).
	ErrCleaningAborted = errors.New("storage: log cleaning aborted")
)
