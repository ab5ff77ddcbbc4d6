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
	return &cobra.Command{
		Use:          "acls",
		Short:        "List the ACLs",
		Args:         cobra.NoArgs,
		SilenceUsage: true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			v, format, err := f.load()
			if err != nil {
				return err
			}
			out := []MetadataACL{}
			for _, a := range v.image.ACLs() {
				out = append(out, MetadataACL{
					ID: base64.RawURLEncoding.EncodeToString(a.ID[:]), ResourceType: a.ResourceType.String(), Name: a.Name,
					PatternType: a.PatternType.String(), Principal: a.Principal, Host: a.Host,
					Operation: a.Operation.String(), Permission: a.Permission.String(),
				})
			}
			if format == outputJSON {
				return writeJSON(cmd.OutOrStdout(), out)
			}
			t := newTable(cmd.OutOrStdout(), "RESOURCE_TYPE", "NAME", "PATTERN", "PRINCIPAL", "HOST", "OPERATION", "PERMISSION")
			for _, a := range out {
				t.row(a.ResourceType, a.Name, a.PatternType, a.Principal, a.Host, a.Operation, a.Permission)
			}
			return t.flush()
		},
	}
}

func newMetadataQuotasCommand(f *metadataFlags) *cobra.Command {
	return &cobra.Command{
		Use:          "quotas",
		Short:        "List the client quotas",
		Args:         cobra.NoArgs,
		SilenceUsage: true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			v, format, err := f.load()
			if err != nil {
				return err
			}
			out := []QuotaEntry{}
			table := v.image.ClientQuotas()
			for _, e := range table.Entities() {
				out = append(out, QuotaEntry{Entity: "{" + e.String() + "}", Values: table[e]}) // as `quota describe` names it
			}
			if format == outputJSON {
				return writeJSON(cmd.OutOrStdout(), out)
			}
			t := newTable(cmd.OutOrStdout(), "ENTITY", "KEY", "VALUE")
			for _, q := range out {
				for _, k := range sortedKeys(q.Values) {
					t.row(q.Entity, k, strconv.FormatFloat(q.Values[k], 'f', -1, 64))
				}
			}
			return t.flush()
		},
	}
}

// scramMechanismNames are the mechanism numbers of the metadata log (Kafka's ScramMechanism).
var scramMechanismNames = map[int8]string{state.ScramSHA256: "SCRAM-SHA-256", state.ScramSHA512: "SCRAM-SHA-512"}

func newMetadataUsersCommand(f *metadataFlags) *cobra.Command {
	return &cobra.Command{
		Use:          "users",
		Short:        "List the users with SCRAM credentials (mechanism and iterations; never the keys)",
		Args:         cobra.NoArgs,
		SilenceUsage: true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			v, format, err := f.load()
			if err != nil {
				return err
			}
			out := []scramRow{}
			for _, k := range v.image.ScramKeys() {
				c, _ := v.image.ScramCredential(k.User, k.Mechanism)
				mech, ok := scramMechanismNames[k.Mechanism]
				if !ok {
					mech = fmt.Sprintf("UNKNOWN(%d)", k.Mechanism)
				}
				out = append(out, scramRow{User: k.User, Mechanism: mech, Iterations: c.Iterations})
			}
			if format == outputJSON {
				return writeJSON(cmd.OutOrStdout(), out)
			}
			t := newTable(cmd.OutOrStdout(), "USER", "MECHANISM", "ITERATIONS")
			for _, r := range out {
				t.row(r.User, r.Mechanism, fmt.Sprint(r.Iterations))
			}
			return t.flush()
		},
	}
}
