package api

import (
	"github.com/gregor-project/gregor/internal/batch"
	"github.com/gregor-project/gregor/internal/metadata"
	"github.com/gregor-project/gregor/internal/replica"
	"github.com/gregor-project/gregor/internal/storage"
)

// topicSettings is settings for the named topic: KIP-890's verification
// (transaction.partition.verification.enable) applies to every topic but the internal ones,
// which only coordinators write.
func (h *Handler) topicSettings(t *metadata.Topic) (replica.Settings, error) {
	s, err := h.settings(t.Configs)
	if err != nil {
		return s, err
	}
	s.TxnVerification = h.Cfg.Current().TransactionPartitionVerificationEnable && !t.Internal
	return s, nil
}

// settings resolves a topic's overrides against the current broker defaults into what a
// partition acts on.
func (h *Handler) settings(overrides map[string]string) (replica.Settings, error) {
	t, err := h.Cfg.ResolveTopic(overrides)
	if err != nil {
		return replica.Settings{}, err
	}
	s := replica.Settings{
		LogAppendTime:     t.LogAppendTime(),
		MaxMessageBytes:   t.MaxMessageBytes,
		MinInsyncReplicas: t.MinInsyncReplicas,
		CompactOnly:       !t.Delete(),
		Log: storage.Config{
			SegmentBytes:          int64(t.SegmentBytes),
			SegmentMs:             t.SegmentMs,
			RetentionMs:           t.RetentionMs,
			RetentionBytes:        t.RetentionBytes,
			IndexIntervalBytes:    t.IndexIntervalBytes,
			SegmentIndexBytes:     t.SegmentIndexBytes,
			FlushIntervalMessages: t.FlushMessages,
			FlushIntervalMs:       t.FlushMs,
			FileDeleteDelayMs:     t.FileDeleteDelayMs,
			Compact:               t.Compact(),
			Compaction: storage.CompactionConfig{
				MinCleanableRatio:  t.MinCleanableDirtyRatio,
				MinCompactionLagMs: t.MinCompactionLagMs,
				MaxCompactionLagMs: t.MaxCompactionLagMs,
				DeleteRetentionMs:  t.DeleteRetentionMs,
			},
		},
	}
	if !t.Delete() {
		// cleanup.policy=compact alone: no time or size retention, only the log cleaner.
		s.Log.RetentionMs, s.Log.RetentionBytes = -1, -1
	}
	switch t.CompressionType {
	case "producer":
	case "uncompressed":
		s.Recompress, s.Compression = true, batch.CodecNone
	case "gzip":
		s.Recompress, s.Compression = true, batch.CodecGzip
	case "snappy":
		s.Recompress, s.Compression = true, batch.CodecSnappy
	case "lz4":
		s.Recompress, s.Compression = true, batch.CodecLZ4
	case "zstd":
		s.Recompress, s.Compression = true, batch.CodecZstd
	}
	return s, nil
}
