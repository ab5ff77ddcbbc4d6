package streams

// StateRestoreListener hears of changelog restores, as Kafka Streams' StateRestoreListener:
// a restore of store's instance for one changelog partition starts at startingOffset and
// ends before endingOffset (the changelog's end when the restore began); each fetched batch
// applied reports its last offset (inclusive; transaction markers are read, not restored)
// and its number of records; when it ends it has applied totalRestored records. A persistent
// store starts after its checkpoint; a task promoted from a standby starts from where the
// standby had read; one with nothing to restore ends at once with zero records.
type StateRestoreListener interface {
	OnRestoreStart(topic string, partition int32, store string, startingOffset, endingOffset int64)
	OnBatchRestored(topic string, partition int32, store string, batchEndOffset, numRestored int64)
	OnRestoreEnd(topic string, partition int32, store string, totalRestored int64)
}

func (a *App) restoreStart(topic string, p int32, store string, start, end int64) {
	if l := a.cfg.StateRestoreListener; l != nil {
		l.OnRestoreStart(topic, p, store, start, end)
	}
}

func (a *App) restoreBatch(topic string, p int32, store string, end, n int64) {
	if l := a.cfg.StateRestoreListener; l != nil {
		l.OnBatchRestored(topic, p, store, end, n)
	}
}

func (a *App) restoreEnd(topic string, p int32, store string, n int64) {
	if l := a.cfg.StateRestoreListener; l != nil {
		l.OnRestoreEnd(topic, p, store, n)
	}
}
