package cli

import (
	"encoding/base64"
	"fmt"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/gregor-project/gregor/internal/controller/state"
)

// `gregor metadata acls|quotas|users`: the security part of the metadata image, offline.

// MetadataACL is one ACL as `gregor metadata acls -o json` prints it.
type MetadataACL struct {
	ID           string `json:"id"`
	ResourceType string `json:"resource_type"`
	Name         string `json:"resource_name"`
	PatternType  string `json:"pattern_type"`
	Principal    string `json:"principal"`
	Host         string `json:"host"`
	Operation    string `json:"operation"`
	Permission   string `json:"permission"`
}

func newMetadataACLsCommand(f *metadataFlags) *cobra.Command {
	return metadataList(f, "acls", "List the ACLs", cobra.NoArgs,
		func(v *metadataView, _ []string) ([]MetadataACL, error) {
			out := []MetadataACL{}
			for _, a := range v.image.ACLs() {
				out = append(out, MetadataACL{
					ID: base64.RawURLEncoding.EncodeToString(a.ID[:]), ResourceType: a.ResourceType.String(), Name: a.Name,
					PatternType: a.PatternType.String(), Principal: a.Principal, Host: a.Host,
					Operation: a.Operation.String(), Permission: a.Permission.String(),
				})
			}
			return out, nil
		},
		[]string{"RESOURCE_TYPE", "NAME", "PATTERN", "PRINCIPAL", "HOST", "OPERATION", "PERMISSION"},
		func(t *table, a MetadataACL) {
			t.row(a.ResourceType, a.Name, a.PatternType, a.Principal, a.Host, a.Operation, a.Permission)
		})
}

func newMetadataQuotasCommand(f *metadataFlags) *cobra.Command {
	return metadataList(f, "quotas", "List the client quotas", cobra.NoArgs,
		func(v *metadataView, _ []string) ([]QuotaEntry, error) {
			out := []QuotaEntry{}
			quotas := v.image.ClientQuotas()
			for _, e := range quotas.Entities() {
				out = append(out, QuotaEntry{Entity: "{" + e.String() + "}", Values: quotas[e]}) // as `quota describe` names it
			}
			return out, nil
		},
		[]string{"ENTITY", "KEY", "VALUE"},
		func(t *table, q QuotaEntry) {
			for _, k := range sortedKeys(q.Values) {
				t.row(q.Entity, k, strconv.FormatFloat(q.Values[k], 'f', -1, 64))
			}
		})
}

// scramMechanismNames are the mechanism numbers of the metadata log (Kafka's ScramMechanism).
var scramMechanismNames = map[int8]string{state.ScramSHA256: "SCRAM-SHA-256", state.ScramSHA512: "SCRAM-SHA-512"}

func newMetadataUsersCommand(f *metadataFlags) *cobra.Command {
	return metadataList(f, "users", "List the users with SCRAM credentials (mechanism and iterations; never the keys)", cobra.NoArgs,
		func(v *metadataView, _ []string) ([]scramRow, error) {
			out := []scramRow{}
			for _, k := range v.image.ScramKeys() {
				c, _ := v.image.ScramCredential(k.User, k.Mechanism)
				mech, ok := scramMechanismNames[k.Mechanism]
				if !ok {
					mech = fmt.Sprintf("UNKNOWN(%d)", k.Mechanism)
				}
				out = append(out, scramRow{User: k.User, Mechanism: mech, Iterations: c.Iterations})
			}
			return out, nil
		},
		[]string{"USER", "MECHANISM", "ITERATIONS"},
		func(t *table, r scramRow) { t.row(r.User, r.Mechanism, fmt.Sprint(r.Iterations)) })
}
