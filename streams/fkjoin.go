package streams

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"slices"

	"github.com/gregor-project/gregor/streams/serde"
)

// JoinForeignKey is the foreign-key table-table join (KIP-213, Kafka's KTable.join with a
// foreign-key extractor): each entry of left joins the entry of right whose key fk extracts
// from its value, the result keyed by left's key. The tables need not be co-partitioned;
// the join goes through two internal topics:
//
//   - <application.id>-KTABLE-FK-JOIN-SUBSCRIPTION-REGISTRATION-NNNNNNNNNN-topic, keyed by
//     the foreign key and partitioned as right: each left update subscribes its key to its
//     foreign key (and unsubscribes from the previous one). The right side keeps the
//     subscriptions in KTABLE-FK-JOIN-SUBSCRIPTION-STATE-STORE-NNNNNNNNNN (with a changelog)
//     and answers each with the right value.
//   - <application.id>-KTABLE-FK-JOIN-SUBSCRIPTION-RESPONSE-NNNNNNNNNN-topic, keyed by
//     left's key and partitioned as left: the answers, and for each right update, one
//     answer to every subscriber of its key.
//
// A subscription carries a hash of the left value that made it and its answer carries it
// back: an answer whose hash is not that of the left value now is stale (the left entry
// changed meanwhile) and is dropped, so the result never goes back to an older left value.
// left must have a store (Table, an aggregation, or Materialized), since an update must
// know its previous value to unsubscribe; it and right need their key and value serdes.
func JoinForeignKey[K, V, KO, VO, VR any](left KTable[K, V], right KTable[KO, VO], fk func(V) KO, f func(v V, vo VO) VR, o ...Option) KTable[K, VR] {
	return fkJoin[K, V, KO, VO, VR](left, right, fk, false, o, func(v, vo any, _ bool) any { return f(as[V](v), as[VO](vo)) })
}

// LeftJoinForeignKey is JoinForeignKey keeping the left entries whose foreign key is not in
// right: f gets found false and VO's zero value for them.
func LeftJoinForeignKey[K, V, KO, VO, VR any](left KTable[K, V], right KTable[KO, VO], fk func(V) KO, f func(v V, vo VO, found bool) VR, o ...Option) KTable[K, VR] {
	return fkJoin[K, V, KO, VO, VR](left, right, fk, true, o, func(v, vo any, found bool) any { return f(as[V](v), as[VO](vo), found) })
}

// Subscription instructions, as Kafka's SubscriptionWrapper.Instruction.
const (
	fkDeleteNoPropagate   byte = 0 // unsubscribe; the left entry moved to another foreign key
	fkDeleteAndPropagate  byte = 1 // unsubscribe and answer: the left entry was deleted
	fkPropagateNullIfNone byte = 2 // answer, with no value when the foreign key has none
	fkPropagateOnlyIfSome byte = 3 // answer only when the foreign key has a value
)

// subscription is a subscription record's value: version 0, the instruction, whether a
// hash follows, the 16-byte hash of the left value, the left key's bytes.
type fkSubscription struct {
	instruction byte
	hash        []byte // nil for a deleted left entry
	pk          []byte
}

func (s fkSubscription) encode() []byte {
	b := []byte{0, s.instruction, 0}
	if s.hash != nil {
		b[2] = 1
		b = append(b, s.hash...)
	}
	return append(b, s.pk...)
}

func decodeFKSubscription(b []byte) (fkSubscription, error) {
	if len(b) < 3 || b[0] != 0 || (b[2] == 1 && len(b) < 19) {
		return fkSubscription{}, errors.New("streams: malformed foreign-key join subscription")
	}
	s := fkSubscription{instruction: b[1]}
	hasHash := b[2] == 1
	b = b[3:]
	if hasHash {
		s.hash, b = b[:16], b[16:]
	}
	s.pk = b
	return s, nil
}

// response is a response record's value: version 0, whether a hash follows, the hash,
// whether a right value follows, the right value's bytes.
func encodeResponse(hash, value []byte, hasValue bool) []byte {
	b := []byte{0, 0}
	if hash != nil {
		b[1] = 1
		b = append(b, hash...)
	}
	if !hasValue {
		return append(b, 0)
	}
	return append(append(b, 1), value...)
}

func decodeResponse(b []byte) (hash, value []byte, hasValue bool, err error) {
	bad := errors.New("streams: malformed foreign-key join response")
	if len(b) < 3 || b[0] != 0 {
		return nil, nil, false, bad
	}
	hasHash := b[1] == 1
	b = b[2:]
	if hasHash {
		if len(b) < 17 {
			return nil, nil, false, bad
		}
		hash, b = b[:16], b[16:]
	}
	if len(b) < 1 {
		return nil, nil, false, bad
	}
	return hash, b[1:], b[0] == 1, nil
}

// valueHash is the hash of a left value's bytes that subscriptions carry (FNV-1a, 128 bits).
func valueHash(b []byte) []byte {
	h := fnv.New128a()
	h.Write(b)
	return h.Sum(nil)
}

// combinedKey is the subscription store's key: the foreign key's length (4 bytes
// big-endian) and bytes, then the left key's bytes, so a foreign key's subscribers are
// one prefix.
func combinedKey(fk, pk []byte) []byte {
	b := binary.BigEndian.AppendUint32(make([]byte, 0, 4+len(fk)+len(pk)), uint32(len(fk)))
	return append(append(b, fk...), pk...)
}

func (b *Builder) sendsOld(n *node) bool { return b.sendOld[n] }

var bytesSerde = serde.Bytes

// fkJoin adds the nodes of a foreign-key join, named as Kafka Streams' KTableImpl names
// them (see JoinForeignKey).
func fkJoin[K, V, KO, VO, VR any](left KTable[K, V], right KTable[KO, VO], fk func(V) KO, leftJoin bool, o []Option,
	joiner func(v, vo any, found bool) any) KTable[K, VR] {
	b := left.b
	op := opts(o)
	if left.ks == nil || left.vs == nil || right.ks == nil || right.vs == nil {
		b.errs = append(b.errs, errors.New("streams: a foreign-key join needs the key and value serdes of both tables"))
		return KTable[K, VR]{b: b, n: left.n}
	}
	if left.store == "" {
		b.errs = append(b.errs, errors.New("streams: the left table of a foreign-key join needs a store (Materialized)"))
		return KTable[K, VR]{b: b, n: left.n}
	}
	if b.sendOld == nil {
		b.sendOld = map[*node]bool{}
	}
	b.sendOld[left.n] = true

	subTopic := b.newName("KTABLE-FK-JOIN-SUBSCRIPTION-REGISTRATION-") + "-topic"
	regName := b.newName("KTABLE-FK-JOIN-SUBSCRIPTION-REGISTRATION-")
	subSink, subSource := b.newName("KTABLE-SINK-"), b.newName("KTABLE-SOURCE-")
	subStore := b.newName("KTABLE-FK-JOIN-SUBSCRIPTION-STATE-STORE-")
	recvName := b.newName("KTABLE-FK-JOIN-SUBSCRIPTION-PROCESSOR-")
	joinName := b.newName("KTABLE-FK-JOIN-SUBSCRIPTION-PROCESSOR-")
	foreignName := b.newName("KTABLE-FK-JOIN-SUBSCRIPTION-PROCESSOR-")
	respTopic := b.newName("KTABLE-FK-JOIN-SUBSCRIPTION-RESPONSE-") + "-topic"
	respSink, respSource := b.newName("KTABLE-SINK-"), b.newName("KTABLE-SOURCE-")
	resolverName := b.newName("KTABLE-FK-JOIN-SUBSCRIPTION-RESPONSE-RESOLVER-PROCESSOR-")
	outName := b.nameOr(options{name: op.name}, "KTABLE-FK-JOIN-OUTPUT-")
	b.internal[subTopic], b.internal[respTopic] = true, true
	b.addStore(newKVStore(subStore, bytesSerde, bytesSerde, ""))

	pkSer := func(k any) ([]byte, error) { return left.ks.Serialize(subTopic, as[K](k)) }
	fkSer := func(k KO) ([]byte, error) { return right.ks.Serialize(subTopic, k) }
	leftHash := func(v any) ([]byte, error) {
		vb, err := left.vs.Serialize(subTopic, as[V](v))
		if err != nil {
			return nil, err
		}
		return valueHash(vb), nil
	}
	raw := func(_ string, v any) ([]byte, error) { return v.([]byte), nil }
	rawDe := func(_ string, b []byte) (any, error) { return b, nil }

	// Left: each update (un)subscribes its key.
	reg := b.add(&node{kind: processorNode, name: regName, supplier: func() procInstance {
		return &funcProc{f: func(c *nodeContext, r rec) error {
			if r.key == nil {
				return nil
			}
			pk, err := pkSer(r.key)
			if err != nil {
				return err
			}
			send := func(fkv KO, s fkSubscription) error {
				fb, err := fkSer(fkv)
				if err != nil {
					return err
				}
				s.pk = pk
				return c.forward(rec{key: fb, value: s.encode(), ts: r.ts, headers: r.headers})
			}
			if r.value == nil {
				if r.old == nil {
					return nil // nothing was subscribed
				}
				return send(fk(r.old.(V)), fkSubscription{instruction: fkDeleteAndPropagate})
			}
			h, err := leftHash(r.value)
			if err != nil {
				return err
			}
			newFK := fk(r.value.(V))
			instr := fkPropagateOnlyIfSome
			if leftJoin {
				instr = fkPropagateNullIfNone
			}
			if r.old != nil {
				oldFK := fk(r.old.(V))
				ob, err := fkSer(oldFK)
				if err != nil {
					return err
				}
				nb, err := fkSer(newFK)
				if err != nil {
					return err
				}
				if !bytes.Equal(ob, nb) {
					if err := send(oldFK, fkSubscription{instruction: fkDeleteNoPropagate, hash: h}); err != nil {
						return err
					}
					// The result had the old foreign key's value: replace it even by nothing.
					instr = fkPropagateNullIfNone
				}
			}
			return send(newFK, fkSubscription{instruction: instr, hash: h})
		}}
	}}, left.n)
	b.add(&node{kind: sinkNode, name: subSink, topic: subTopic, keySer: raw, valSer: raw}, reg)

	// Right: keep the subscriptions, answer each with the right value.
	src := b.add(&node{kind: sourceNode, name: subSource, topics: []string{subTopic}, keyDe: rawDe, valDe: rawDe})
	recv := b.add(&node{kind: processorNode, name: recvName, stores: []string{subStore}, supplier: func() procInstance {
		return &funcProcInit{initf: func(c *nodeContext) (func(*nodeContext, rec) error, error) {
			subs, err := fkSubStore(c.task, subStore)
			if err != nil {
				return nil, err
			}
			return func(c *nodeContext, r rec) error {
				if r.key == nil || r.value == nil {
					return nil
				}
				s, err := decodeFKSubscription(r.value.([]byte))
				if err != nil {
					return err
				}
				ck := combinedKey(r.key.([]byte), s.pk)
				if s.instruction == fkDeleteNoPropagate || s.instruction == fkDeleteAndPropagate {
					err = subs.Delete(ck)
				} else {
					err = subs.Put(ck, r.value.([]byte))
				}
				if err != nil {
					return err
				}
				return c.forward(r)
			}, nil
		}}
	}}, src)
	rv := viewOf(right)
	needView(b, rv)
	fkDe := func(b []byte) (KO, error) { return right.ks.Deserialize(subTopic, b) }
	rvSer := func(v any) ([]byte, error) { return right.vs.Serialize(respTopic, as[VO](v)) }
	answer := func(c *nodeContext, r rec, pk, hash []byte, vo any, found bool) error {
		var vb []byte
		if found {
			var err error
			if vb, err = rvSer(vo); err != nil {
				return err
			}
		}
		return c.forward(rec{key: pk, value: encodeResponse(hash, vb, found), ts: r.ts, headers: r.headers})
	}
	join := b.add(&node{kind: processorNode, name: joinName, stores: slices.Clone(rv.stores), supplier: func() procInstance {
		return &funcProcInit{initf: func(c *nodeContext) (func(*nodeContext, rec) error, error) {
			get, err := rv.open(c.task)
			if err != nil {
				return nil, err
			}
			return func(c *nodeContext, r rec) error {
				s, err := decodeFKSubscription(r.value.([]byte))
				if err != nil {
					return err
				}
				if s.instruction == fkDeleteNoPropagate {
					return nil
				}
				fkv, err := fkDe(r.key.([]byte))
				if err != nil {
					return err
				}
				vo, _, found, err := get(fkv)
				if err != nil {
					return err
				}
				if s.instruction == fkPropagateOnlyIfSome && !found {
					return nil
				}
				return answer(c, r, s.pk, s.hash, vo, found)
			}, nil
		}}
	}}, recv)
	// Right updates: answer every subscriber of the key.
	foreign := b.add(&node{kind: processorNode, name: foreignName, stores: []string{subStore}, supplier: func() procInstance {
		return &funcProcInit{initf: func(c *nodeContext) (func(*nodeContext, rec) error, error) {
			subs, err := fkSubStore(c.task, subStore)
			if err != nil {
				return nil, err
			}
			return func(c *nodeContext, r rec) error {
				if r.key == nil {
					return nil
				}
				fb, err := fkSer(r.key.(KO))
				if err != nil {
					return err
				}
				entries, err := subs.prefix(combinedKey(fb, nil))
				if err != nil {
					return err
				}
				for _, e := range entries {
					s, err := decodeFKSubscription(e)
					if err != nil {
						return err
					}
					if err := answer(c, r, s.pk, s.hash, r.value, r.value != nil); err != nil {
						return err
					}
				}
				return nil
			}, nil
		}}
	}}, right.n)
	b.add(&node{kind: sinkNode, name: respSink, topic: respTopic, keySer: raw, valSer: raw}, join, foreign)

	// Left again: resolve each answer against the left value now.
	lv := viewOf(left)
	rsrc := b.add(&node{kind: sourceNode, name: respSource, topics: []string{respTopic}, keyDe: deserializer(left.ks), valDe: rawDe})
	voDe := func(b []byte) (any, error) { return right.vs.Deserialize(respTopic, b) }
	resolver := b.add(&node{kind: processorNode, name: resolverName, stores: slices.Clone(lv.stores), supplier: func() procInstance {
		return &funcProcInit{initf: func(c *nodeContext) (func(*nodeContext, rec) error, error) {
			get, err := lv.open(c.task)
			if err != nil {
				return nil, err
			}
			return func(c *nodeContext, r rec) error {
				if r.key == nil || r.value == nil {
					return nil
				}
				hash, vb, hasValue, err := decodeResponse(r.value.([]byte))
				if err != nil {
					return err
				}
				v, _, found, err := get(r.key)
				if err != nil {
					return err
				}
				var now []byte
				if found {
					if now, err = leftHash(v); err != nil {
						return err
					}
				}
				if !bytes.Equal(now, hash) {
					return nil // stale: the left entry changed since it subscribed
				}
				out := rec{key: r.key, ts: r.ts, headers: r.headers}
				switch {
				case !found:
				case hasValue:
					vo, err := voDe(vb)
					if err != nil {
						return err
					}
					out.value = joiner(v, vo, true)
				case leftJoin:
					out.value = joiner(v, nil, false)
				}
				return c.forward(out)
			}, nil
		}}
	}}, rsrc)

	b.copartition(src, right.n)
	b.copartition(rsrc, left.n)
	return derivedTable[K, VR](b, outName, []*node{resolver}, left.ks, nil, op, nil,
		func(*task) (func(r rec) (rec, bool, error), error) {
			return func(r rec) (rec, bool, error) { return r, false, nil }, nil
		}, nil)
}

// fkSubs is a foreign-key join's subscription store, with the prefix scan it needs.
type fkSubs struct {
	*kvStore[[]byte, []byte]
}

func fkSubStore(tk *task, name string) (fkSubs, error) {
	kv, ok := tk.stores[name].(*kvStore[[]byte, []byte])
	if !ok {
		return fkSubs{}, fmt.Errorf("streams: store %q is not a subscription store", name)
	}
	return fkSubs{kv}, nil
}

// prefix is the values of the entries whose key starts with p, in key order.
func (s fkSubs) prefix(p []byte) ([][]byte, error) {
	var out [][]byte
	err := s.b.scan(func(k, v []byte) bool {
		if bytes.HasPrefix(k, p) {
			out = append(out, append([]byte{}, v...))
		}
		return bytes.Compare(k[:min(len(k), len(p))], p) <= 0
	})
	return out, err
}
