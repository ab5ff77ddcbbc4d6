package streams

import "strconv"

// BranchedStream splits a stream by predicates (Kafka Streams' split().branch()): each
// record goes to the first branch whose predicate is true, or to the default branch, or is
// dropped.
type BranchedStream[K, V any] struct {
	s      KStream[K, V]
	prefix string
	node   *node
	preds  []func(K, V) bool // one per branch child, in order; nil for the default branch
	out    map[string]KStream[K, V]
}

// Split starts splitting s; Named sets the prefix of the branch names.
func (s KStream[K, V]) Split(o ...Option) *BranchedStream[K, V] {
	op := opts(o)
	bs := &BranchedStream[K, V]{s: s, prefix: op.name, out: map[string]KStream[K, V]{}}
	name := op.name
	if name == "" {
		name = s.b.newName("KSTREAM-BRANCH-")
	}
	bs.node = s.b.add(&node{kind: processorNode, name: name, supplier: func() procInstance {
		return &funcProc{f: func(c *nodeContext, r rec) error {
			k, v := as[K](r.key), as[V](r.value)
			for i, p := range bs.preds {
				if p == nil || p(k, v) {
					return c.children[i].receive(r)
				}
			}
			return nil
		}}
	}}, s.n)
	return bs
}

func (bs *BranchedStream[K, V]) add(pred func(K, V) bool, name string) {
	if name == "" {
		name = strconv.Itoa(len(bs.preds) + 1)
		if pred == nil {
			name = "0"
		}
	}
	key := bs.prefix + name
	nodeName := key
	if bs.prefix == "" {
		nodeName = bs.s.b.newName("KSTREAM-BRANCHCHILD-")
	}
	n := bs.s.b.add(&node{kind: processorNode, name: nodeName,
		supplier: func() procInstance { return &funcProc{f: (*nodeContext).forward} }}, bs.node)
	bs.preds = append(bs.preds, pred)
	bs.out[key] = KStream[K, V]{b: bs.s.b, n: n, ks: bs.s.ks, vs: bs.s.vs, keyChanged: bs.s.keyChanged}
}

// Branch adds a branch for the records pred accepts (and no earlier branch took). name ""
// numbers the branch from 1.
func (bs *BranchedStream[K, V]) Branch(pred func(K, V) bool, name string) *BranchedStream[K, V] {
	bs.add(pred, name)
	return bs
}

// DefaultBranch adds the branch of the records no predicate took (name "" is "0") and
// returns the branches by prefix+name.
func (bs *BranchedStream[K, V]) DefaultBranch(name string) map[string]KStream[K, V] {
	bs.add(nil, name)
	return bs.out
}

// NoDefaultBranch returns the branches by prefix+name; records no predicate took are dropped.
func (bs *BranchedStream[K, V]) NoDefaultBranch() map[string]KStream[K, V] { return bs.out }
