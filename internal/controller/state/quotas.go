package state

import (
	"encoding/binary"
	"fmt"
	"maps"
	"math"
	"sort"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/gregor-project/gregor/internal/quota"
)

// Client quotas (KIP-13, KIP-55, KIP-546): the values AlterClientQuotas sets per entity, in
// the image as quota.Table (Image.ClientQuotas), changed only by ClientQuotaRecords.
//
// Invariant: every entity in the table parses (quota.ParseEntity) and has at least one key;
// removing an entity's last key removes the entity.

// ClientQuotaRecord sets or removes one quota key of one entity, as Kafka's ClientQuotaRecord.
//
//	entity: count uvarint, then (Type string | HasName bool | [Name string])* |
//	Key string | Value float64 (8 bytes, IEEE 754 big-endian) | Remove bool
//
// A part without a name is the default entity of its type. Value is 0 when Remove is set.
type ClientQuotaRecord struct {
	Entity []quota.Part
	Key    string
	Value  float64
	Remove bool
}

func (*ClientQuotaRecord) Type() RecordType { return TypeClientQuota }
func (*ClientQuotaRecord) version() uint64  { return 0 }

func (r *ClientQuotaRecord) encode(e *encoder) {
	e.uvarint(uint64(len(r.Entity)))
	for _, p := range r.Entity {
		e.string(p.Type)
		e.bool(p.Name != nil)
		if p.Name != nil {
			e.string(*p.Name)
		}
	}
	e.string(r.Key)
	e.b = binary.BigEndian.AppendUint64(e.b, math.Float64bits(r.Value))
	e.bool(r.Remove)
}

func (r *ClientQuotaRecord) decode(d *decoder, _ uint64) {
	n := d.count(2) // a part is at least 2 bytes
	if n > 0 {
		r.Entity = make([]quota.Part, n)
		for i := range r.Entity {
			r.Entity[i].Type = d.string()
			if d.bool() {
				s := d.string()
				r.Entity[i].Name = &s
			}
		}
	}
	r.Key = d.string()
	if d.err == nil && len(d.b) < 8 {
		d.fail("float64")
	}
	if d.err == nil {
		r.Value = math.Float64frombits(binary.BigEndian.Uint64(d.b))
		d.b = d.b[8:]
	}
	r.Remove = d.bool()
}

// applyClientQuota applies r to the quota table, copy on write (a reader may hold the old
// inner map).
func (im *Image) applyClientQuota(r *ClientQuotaRecord) error {
	e, err := quota.ParseEntity(r.Entity)
	if err != nil {
		return reject("client quota: %v", err)
	}
	if r.Key == "" {
		return reject("client quota of %v: empty key", e)
	}
	m := maps.Clone(im.quotas[e])
	if r.Remove {
		delete(m, r.Key)
	} else {
		if m == nil {
			m = map[string]float64{}
		}
		m[r.Key] = r.Value
	}
	if im.quotas == nil {
		im.quotas = quota.Table{}
	}
	if len(m) == 0 {
		delete(im.quotas, e)
	} else {
		im.quotas[e] = m
	}
	return nil
}

// ClientQuotas returns every client quota set. Nothing in it may be modified. Later records
// change the table itself in place but never a key map in it (copy on write): keep a copy of
// the table (maps.Clone) to keep what it holds now.
func (im *Image) ClientQuotas() quota.Table { return im.quotas }

// clientQuotaRecords returns the records that rebuild the quota table (snapshots): by entity
// in quota.Table.Entities order, keys sorted.
func (im *Image) clientQuotaRecords() []Record {
	var recs []Record
	for _, e := range im.quotas.Entities() {
		m := im.quotas[e]
		for _, k := range sortedKeys(m) {
			recs = append(recs, &ClientQuotaRecord{Entity: e.Parts(), Key: k, Value: m[k]})
		}
	}
	return recs
}

// ClientQuotaOp sets (Remove false) or removes one key of an entity.
type ClientQuotaOp struct {
	Key    string
	Value  float64
	Remove bool
}

// ClientQuotaAlteration is the changes to one entity, as AlterClientQuotas carries them.
type ClientQuotaAlteration struct {
	Entity []quota.Part
	Ops    []ClientQuotaOp
}

// AlterClientQuotasRequest is AlterClientQuotas.
type AlterClientQuotasRequest struct {
	Alterations  []ClientQuotaAlteration
	ValidateOnly bool
}

// AlterClientQuotas validates and records quota changes, as Kafka's ClientQuotaControlManager:
// each entity succeeds or fails alone, with INVALID_REQUEST and Kafka's message; a value
// equal to the current one and the removal of a key not set write nothing. The result has
// one error per alteration, in order.
func (c *Controller) AlterClientQuotas(req AlterClientQuotasRequest) ([]Record, []error) {
	var recs []Record
	errs := make([]error, len(req.Alterations))
	seen := map[quota.Entity]bool{}
	for i, a := range req.Alterations {
		e, err := quota.ParseEntity(a.Entity)
		if err != nil {
			errs[i] = invalidQuota("%v", err)
			continue
		}
		if seen[e] {
			errs[i] = invalidQuota("Ignoring duplicate entity %v", e)
			continue
		}
		seen[e] = true
		arecs, err := c.alterClientQuota(e, a.Ops)
		if err != nil {
			errs[i] = err
			continue
		}
		if !req.ValidateOnly {
			recs = append(recs, arecs...)
		}
	}
	return recs, errs
}

func (c *Controller) alterClientQuota(e quota.Entity, ops []ClientQuotaOp) ([]Record, error) {
	keys := map[string]bool{}
	for _, op := range ops {
		if keys[op.Key] {
			return nil, invalidQuota("Duplicate quota key %s not updating quota for this entity %v", op.Key, e)
		}
		keys[op.Key] = true
	}
	// Kafka visits the keys in hash order; sorted keeps every controller's records equal.
	sorted := append([]ClientQuotaOp(nil), ops...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].Key < sorted[j].Key })
	current := c.im.quotas[e]
	var recs []Record
	for _, op := range sorted {
		old, had := current[op.Key]
		if op.Remove {
			if had {
				recs = append(recs, &ClientQuotaRecord{Entity: e.Parts(), Key: op.Key, Remove: true})
			}
			continue
		}
		if err := quota.ValidateValue(e, op.Key, op.Value); err != nil {
			return nil, invalidQuota("%v", err)
		}
		if !had || old != op.Value {
			recs = append(recs, &ClientQuotaRecord{Entity: e.Parts(), Key: op.Key, Value: op.Value})
		}
	}
	return recs, nil
}

// quotaError is an AlterClientQuotas refusal: INVALID_REQUEST whose text is Kafka's message
// alone, which clients show as they would Kafka's.
type quotaError struct{ msg string }

func invalidQuota(format string, args ...any) error {
	return &quotaError{msg: fmt.Sprintf(format, args...)}
}

func (e *quotaError) Error() string { return e.msg }
func (e *quotaError) Unwrap() error { return kerr.InvalidRequest }
