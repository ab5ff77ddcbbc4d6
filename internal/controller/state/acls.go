package state

import (
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/gregor-project/gregor/internal/authz"
)

// CreateAcls and DeleteAcls, as Kafka's AclControlManager decides them.

// CreateAcls validates each binding (authz.Binding.Validate; INVALID_REQUEST) and writes
// an AccessControlEntryRecord with a new id for each valid one that does not exist yet. A
// binding that exists already, or that an earlier entry of the same request creates,
// succeeds without a record, as in Kafka. The result has one error per binding.
func (c *Controller) CreateAcls(bindings []authz.Binding) ([]Record, []error) {
	var recs []Record
	errs := make([]error, len(bindings))
	created := map[authz.Binding]bool{}
	ids := map[UUID]bool{}
	for i, b := range bindings {
		if err := b.Validate(); err != nil {
			errs[i] = fmt.Errorf("%w: %w", kerr.InvalidRequest, err)
			continue
		}
		if _, ok := c.im.aclIDs[b]; ok || created[b] {
			continue
		}
		id := c.newACLID(ids)
		ids[id] = true
		created[b] = true
		recs = append(recs, &AccessControlEntryRecord{ID: id, Binding: b})
	}
	return recs, errs
}

// newACLID returns an id no ACL has and that is not in taken.
func (c *Controller) newACLID(taken map[UUID]bool) UUID {
	for {
		id := c.cfg.NewUUID()
		if _, ok := c.im.acls[id]; !ok && !taken[id] && id != (UUID{}) {
			return id
		}
	}
}

// DeleteAclsResult is the outcome of one DeleteAcls filter: the bindings it matched
// (and deleted), or an error.
type DeleteAclsResult struct {
	Matched []authz.Binding
	Err     error
}

// DeleteAcls removes every ACL each filter matches (authz.Filter.Matches). A filter with an
// UNKNOWN field is INVALID_REQUEST (authz.Filter.Validate). An ACL matched by several
// filters is removed once and reported under each. Matches are reported in id order.
func (c *Controller) DeleteAcls(filters []authz.Filter) ([]Record, []DeleteAclsResult) {
	var recs []Record
	results := make([]DeleteAclsResult, len(filters))
	removed := map[UUID]bool{}
	all := c.im.ACLs()
	for i, f := range filters {
		if err := f.Validate(); err != nil {
			results[i].Err = fmt.Errorf("%w: %w", kerr.InvalidRequest, err)
			continue
		}
		for _, a := range all {
			if !f.Matches(a.Binding) {
				continue
			}
			results[i].Matched = append(results[i].Matched, a.Binding)
			if !removed[a.ID] {
				removed[a.ID] = true
				recs = append(recs, &RemoveAccessControlEntryRecord{ID: a.ID})
			}
		}
	}
	return recs, results
}
