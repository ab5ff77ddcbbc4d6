package state

import (
	"crypto/hmac"
	"crypto/sha256"
	"crypto/sha512"
	"fmt"
	"hash"

	"github.com/twmb/franz-go/pkg/kerr"
)

// AlterUserScramCredentials, as Kafka's ScramControlManager decides it.

// SCRAM iteration bounds (Kafka's ScramMechanism minIterations, and MAX_ITERATIONS).
const (
	ScramMinIterations = 4096
	ScramMaxIterations = 16384
)

// ScramDeletion deletes one user's credential for one mechanism.
type ScramDeletion struct {
	User      string
	Mechanism int8
}

// ScramUpsertion sets one user's credential for one mechanism. The client sends the
// salted password (Hi(password, salt, iterations) of RFC 5802), never the password.
type ScramUpsertion struct {
	User           string
	Mechanism      int8
	Iterations     int32
	Salt           []byte
	SaltedPassword []byte
}

// AlterScramRequest is AlterUserScramCredentials.
type AlterScramRequest struct {
	Deletions  []ScramDeletion
	Upsertions []ScramUpsertion
}

// AlterScramResult is the outcome for one user.
type AlterScramResult struct {
	User string
	Err  error
}

// AlterUserScramCredentials deletes and sets credentials. Each user is judged alone, in
// Kafka's order: deletions first, then upsertions; the first error a user gets is its
// answer. The checks:
//   - an empty user name is UNACCEPTABLE_CREDENTIAL;
//   - a mechanism other than SCRAM-SHA-256 and SCRAM-SHA-512 is UNSUPPORTED_SASL_MECHANISM;
//   - deleting a credential that does not exist is RESOURCE_NOT_FOUND;
//   - iterations outside [ScramMinIterations, ScramMaxIterations] is UNACCEPTABLE_CREDENTIAL;
//   - a user altered twice in one request (whatever the mechanisms) is DUPLICATE_RESOURCE,
//     and none of its alterations apply.
//
// The result has one entry per user, in the order each user first appears (deletions,
// then upsertions).
func (c *Controller) AlterUserScramCredentials(req AlterScramRequest) ([]Record, []AlterScramResult) {
	var order []string
	failed := map[string]error{}
	dels := map[string]ScramDeletion{}
	ups := map[string]ScramUpsertion{}
	seen := func(user string) {
		if _, ok := failed[user]; ok {
			return
		}
		if _, ok := dels[user]; ok {
			return
		}
		if _, ok := ups[user]; ok {
			return
		}
		order = append(order, user)
	}
	duplicate := errf(kerr.DuplicateResource, "a user credential cannot be altered twice in the same request")
	for _, d := range req.Deletions {
		seen(d.User)
		if _, ok := failed[d.User]; ok {
			continue
		}
		if _, ok := dels[d.User]; ok {
			delete(dels, d.User)
			failed[d.User] = duplicate
			continue
		}
		if err := c.checkScramDeletion(d); err != nil {
			failed[d.User] = err
			continue
		}
		dels[d.User] = d
	}
	for _, u := range req.Upsertions {
		seen(u.User)
		if _, ok := failed[u.User]; ok {
			continue
		}
		_, del := dels[u.User]
		_, up := ups[u.User]
		if del || up {
			delete(dels, u.User)
			delete(ups, u.User)
			failed[u.User] = duplicate
			continue
		}
		if err := checkScramUpsertion(u); err != nil {
			failed[u.User] = err
			continue
		}
		ups[u.User] = u
	}
	var recs []Record
	results := make([]AlterScramResult, len(order))
	for i, user := range order {
		results[i] = AlterScramResult{User: user, Err: failed[user]}
		if d, ok := dels[user]; ok {
			recs = append(recs, &RemoveUserScramCredentialRecord{Name: d.User, Mechanism: d.Mechanism})
		}
		if u, ok := ups[user]; ok {
			storedKey, serverKey := DeriveScramKeys(u.Mechanism, u.SaltedPassword)
			recs = append(recs, &UserScramCredentialRecord{
				Name: u.User, Mechanism: u.Mechanism, Salt: u.Salt,
				StoredKey: storedKey, ServerKey: serverKey, Iterations: u.Iterations,
			})
		}
	}
	return recs, results
}

func checkScramUser(user string, mechanism int8) error {
	if user == "" {
		return errf(kerr.UnacceptableCredential, "username must not be empty")
	}
	if ScramMechanismName(mechanism) == "" {
		return errf(kerr.UnsupportedSaslMechanism, "unknown SCRAM mechanism %d", mechanism)
	}
	return nil
}

func (c *Controller) checkScramDeletion(d ScramDeletion) error {
	if err := checkScramUser(d.User, d.Mechanism); err != nil {
		return err
	}
	if _, ok := c.im.scram[ScramKey{d.User, d.Mechanism}]; !ok {
		return errf(kerr.ResourceNotFound, "attempt to delete a user credential that does not exist")
	}
	return nil
}

func checkScramUpsertion(u ScramUpsertion) error {
	if err := checkScramUser(u.User, u.Mechanism); err != nil {
		return err
	}
	switch {
	case u.Iterations < ScramMinIterations:
		return errf(kerr.UnacceptableCredential, "too few iterations (%d, at least %d)", u.Iterations, ScramMinIterations)
	case u.Iterations > ScramMaxIterations:
		return errf(kerr.UnacceptableCredential, "too many iterations (%d, at most %d)", u.Iterations, ScramMaxIterations)
	}
	return nil
}

// DeriveScramKeys derives what the server keeps from a salted password (RFC 5802, Kafka's
// ScramFormatter): StoredKey = H(HMAC(saltedPassword, "Client Key")) and ServerKey =
// HMAC(saltedPassword, "Server Key"), with H and HMAC over SHA-256 or SHA-512 by
// mechanism. The mechanism must be known.
func DeriveScramKeys(mechanism int8, saltedPassword []byte) (storedKey, serverKey []byte) {
	h := scramHash(mechanism)
	mac := hmac.New(h, saltedPassword)
	mac.Write([]byte("Client Key"))
	clientKey := mac.Sum(nil)
	sum := h()
	sum.Write(clientKey)
	storedKey = sum.Sum(nil)
	mac = hmac.New(h, saltedPassword)
	mac.Write([]byte("Server Key"))
	return storedKey, mac.Sum(nil)
}

func scramHash(mechanism int8) func() hash.Hash {
	switch mechanism {
	case ScramSHA256:
		return sha256.New
	case ScramSHA512:
		return sha512.New
	}
	panic(fmt.Sprintf("state: SCRAM mechanism %d", mechanism))
}
