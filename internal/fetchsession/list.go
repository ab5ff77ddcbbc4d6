package fetchsession

// list holds a session's partitions in the session's order (Kafka's ImplicitLinkedHashCollection):
// a slab of slots linked into a doubly-linked list, with an index by key. A slot keeps its
// index while the partition is in the session, so a fetch may refer to partitions by slot;
// moving a partition to the back costs O(1) and never touches the index.
//
// Invariants: index[k] == i iff slots[i] is linked and slots[i].Key == k; n == len(index);
// a slot in free is unlinked.
type list struct {
	slots      []Partition
	free       []int32
	index      map[Key]int32
	head, tail int32
	n          int
}

func newList(n int) list {
	return list{slots: make([]Partition, 0, n), index: make(map[Key]int32, n), head: -1, tail: -1}
}

// pushBack adds p (whose key is not in the list) at the back.
func (l *list) pushBack(p Partition) {
	var i int32
	if k := len(l.free); k > 0 {
		i = l.free[k-1]
		l.free = l.free[:k-1]
		l.slots[i] = p
	} else {
		i = int32(len(l.slots))
		l.slots = append(l.slots, p)
	}
	l.index[p.Key] = i
	l.n++
	l.link(i)
}

// remove drops the partition with key k; false when it is not in the list.
func (l *list) remove(k Key) bool {
	i, ok := l.index[k]
	if !ok {
		return false
	}
	delete(l.index, k)
	l.unlink(i)
	l.slots[i] = Partition{}
	l.free = append(l.free, i)
	l.n--
	return true
}

// moveToBack moves slot i (linked) to the back.
func (l *list) moveToBack(i int32) {
	if l.tail == i {
		return
	}
	l.unlink(i)
	l.link(i)
}

// link appends the unlinked slot i at the back.
func (l *list) link(i int32) {
	l.slots[i].prev, l.slots[i].next = l.tail, -1
	if l.tail >= 0 {
		l.slots[l.tail].next = i
	} else {
		l.head = i
	}
	l.tail = i
}

func (l *list) unlink(i int32) {
	p := &l.slots[i]
	if p.prev >= 0 {
		l.slots[p.prev].next = p.next
	} else {
		l.head = p.next
	}
	if p.next >= 0 {
		l.slots[p.next].prev = p.prev
	} else {
		l.tail = p.prev
	}
	p.prev, p.next = -1, -1
}
