package state

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
)

// Snapshot format. A snapshot is the image written as records, so one decoder and one Apply
// serve both the log and compaction:
//
//	snapshot = "GRSN"  format:1  batch  crc:uint32 (big-endian CRC-32C of everything before it)
//
// The batch (see records.go) holds, in order: one SnapshotHeaderRecord (offset and counters),
// a RegisterBrokerRecord per broker (with its fenced/shutdown state and registration offset),
// per topic by name a TopicRecord followed by its PartitionRecords in partition order, then
// a ConfigRecord per override (resources sorted by type and name, keys sorted), a
// UserScramCredentialRecord per SCRAM credential (by user, then mechanism), an
// AccessControlEntryRecord per ACL (by id), then a ClientQuotaRecord per client quota key
// (entities in quota.Table.Entities order, keys sorted).
const (
	snapshotMagic  = "GRSN"
	snapshotFormat = 1
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Snapshot encodes the image.
func (im *Image) Snapshot() []byte {
	count := 1 + len(im.brokers) + len(im.topics) + im.partitions
	for _, m := range im.configs {
		count += len(m)
	}
	security := im.securityRecords()
	count += len(security)
	quotaRecs := im.clientQuotaRecords()
	count += len(quotaRecs)
	tokenRecs := im.tokenRecords()
	count += len(tokenRecs)
	e := &encoder{b: make([]byte, 0, 64+48*count)}
	e.b = append(e.b, snapshotMagic...)
	e.b = append(e.b, snapshotFormat, batchMagic, batchFormat)
	e.uvarint(uint64(count))
	var scratch encoder
	appendRecord(e, &scratch, &SnapshotHeaderRecord{Offset: im.offset, NextBrokerEpoch: im.nextBrokerEpoch, NextProducerID: im.nextProducerID})
	for _, b := range im.Brokers() {
		appendRecord(e, &scratch, &RegisterBrokerRecord{
			NodeID: b.ID, IncarnationID: b.IncarnationID, BrokerEpoch: b.Epoch, Endpoints: b.Endpoints,
			Rack: b.Rack, Fenced: b.Fenced, InControlledShutdown: b.InControlledShutdown,
			RegisteredOffset: b.RegisteredOffset,
		})
	}
	pr := &PartitionRecord{}
	for _, t := range im.sortedTopics() {
		appendRecord(e, &scratch, &TopicRecord{Name: t.Name, TopicID: t.ID})
		for i, p := range t.Partitions {
			*pr = PartitionRecord{
				TopicID: t.ID, Partition: int32(i), Replicas: p.Replicas, ISR: p.ISR, Adding: p.Adding,
				Removing: p.Removing, Leader: p.Leader, LeaderEpoch: p.LeaderEpoch, PartitionEpoch: p.PartitionEpoch,
			}
			appendRecord(e, &scratch, pr)
		}
	}
	for _, res := range im.ConfigResources() {
		m := im.configs[res]
		for _, k := range sortedKeys(m) {
			appendRecord(e, &scratch, &ConfigRecord{ResourceType: res.Type, ResourceName: res.Name, Name: k, Value: m[k]})
		}
	}
	for _, r := range security {
		appendRecord(e, &scratch, r)
	}
	for _, r := range quotaRecs {
		appendRecord(e, &scratch, r)
	}
	for _, r := range tokenRecs {
		appendRecord(e, &scratch, r)
	}
	return binary.BigEndian.AppendUint32(e.b, crc32.Checksum(e.b, castagnoli))
}

// Restore decodes a snapshot into a new image. Nothing is shared with b.
func Restore(b []byte) (*Image, error) {
	if len(b) < len(snapshotMagic)+2+4 || string(b[:len(snapshotMagic)]) != snapshotMagic {
		return nil, fmt.Errorf("%w: not a metadata snapshot", ErrCorruptRecord)
	}
	body, sum := b[:len(b)-4], binary.BigEndian.Uint32(b[len(b)-4:])
	if crc32.Checksum(body, castagnoli) != sum {
		return nil, fmt.Errorf("%w: snapshot checksum mismatch", ErrCorruptRecord)
	}
	if f := body[len(snapshotMagic)]; f != snapshotFormat {
		return nil, fmt.Errorf("%w: snapshot format %d", ErrCorruptRecord, f)
	}
	batch := body[len(snapshotMagic)+1:]
	if len(batch) < 2 || batch[0] != batchMagic || batch[1] != batchFormat {
		return nil, fmt.Errorf("%w: snapshot batch header", ErrCorruptRecord)
	}
	d := &decoder{b: batch[2:]}
	n := d.count(2)
	if d.err != nil {
		return nil, d.err
	}
	if n == 0 {
		return nil, fmt.Errorf("%w: empty snapshot", ErrCorruptRecord)
	}
	im := NewImage()
	for i := range n {
		r, err := decodeRecord(d)
		if err != nil {
			return nil, fmt.Errorf("snapshot record %d: %w", i, err)
		}
		if h, ok := r.(*SnapshotHeaderRecord); ok {
			if i != 0 {
				return nil, fmt.Errorf("%w: snapshot header at record %d", ErrCorruptRecord, i)
			}
			im.offset, im.nextBrokerEpoch, im.nextProducerID = h.Offset, h.NextBrokerEpoch, h.NextProducerID
			continue
		}
		if i == 0 {
			return nil, fmt.Errorf("%w: snapshot does not start with a header", ErrCorruptRecord)
		}
		if err := im.apply(im.offset, r); err != nil {
			return nil, fmt.Errorf("snapshot record %d: %w", i, err)
		}
	}
	if len(d.b) != 0 {
		return nil, fmt.Errorf("%w: %d bytes after the last snapshot record", ErrCorruptRecord, len(d.b))
	}
	return im, nil
}
