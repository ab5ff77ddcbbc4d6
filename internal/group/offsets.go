package group

// expireOffsets removes offsets past offsets.retention.minutes (step 2).
func (s *Shard) expireOffsets() {}
