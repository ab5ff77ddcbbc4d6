package streams

// StateRestoreListener hears of changelog restores, as Kafka Streams' StateRestoreListener:
// a restore of store's instance for one changelog partition starts at startingOffset and
// ends before endingOffset (the changelog's end when the restore began), and when it ends it
// has applied totalRestored records. A task promoted from a standby starts from where the
// standby had read; one with nothing to restore ends at once with zero records.
type StateRestoreListener interface {
	OnRestoreStart(topic string, partition int32, store string, startingOffset, endingOffset int64)
	OnRestoreEnd(topic string, partition int32, store string, totalRestored int64)
}

func (a *App) restoreStart(topic string, p int32, store string, start, end int64) {
	if l := a.cfg.StateRestoreListener; l != nil {
		l.OnRestoreStart(topic, p, store, start, end)
	}
}

func (a *App) restoreEnd(topic string, p int32, store string, n int64) {
	if l := a.cfg.StateRestoreListener; l != nil {
		l.OnRestoreEnd(topic, p, store, n)
	}
}
