package cli

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"
)

// `gregor quota set|describe|remove`: client quotas (KIP-546), as
// kafka-configs.sh --entity-type users/clients/ips manages them. An entity is
// named with --user/--client/--ip, or the default entity of a type with
// --user-defaults/--client-defaults/--ip-defaults; a user and a client id may
// be combined (the quota of that client id of that user).
//
//	gregor quota set --client app --add-config producer_byte_rate=1048576,consumer_byte_rate=2097152
//	gregor quota set --user-defaults --add-config request_percentage=50
//	gregor quota describe [--user alice] [--client-defaults] [--strict]
//	gregor quota remove --client app --delete-config producer_byte_rate

// quotaEntityFlags name one entity, or filter a describe.
type quotaEntityFlags struct {
	user, client, ip                         string
	userDefaults, clientDefaults, ipDefaults bool
}

func (f *quotaEntityFlags) register(cmd *cobra.Command) {
	cmd.Flags().StringVar(&f.user, "user", "", "the user (principal name) the quota is of")
	cmd.Flags().StringVar(&f.client, "client", "", "the client id the quota is of")
	cmd.Flags().StringVar(&f.ip, "ip", "", "the client IP address the quota is of")
	cmd.Flags().BoolVar(&f.userDefaults, "user-defaults", false, "the default quota of every user")
	cmd.Flags().BoolVar(&f.clientDefaults, "client-defaults", false, "the default quota of every client id")
	cmd.Flags().BoolVar(&f.ipDefaults, "ip-defaults", false, "the default quota of every IP address")
}

// quotaPart is one entity type's component: nil when the type is not named, a nil
// Name for the default.
func quotaPart(cmd *cobra.Command, typ, nameFlag, name, defFlag string, def bool) (*kadm.ClientQuotaEntityComponent, error) {
	named := cmd.Flags().Changed(nameFlag)
	switch {
	case named && def:
		return nil, fmt.Errorf("--%s and --%s name two entities of one type: give one", nameFlag, defFlag)
	case named && name == "":
		return nil, fmt.Errorf("--%s: empty name (use --%s for the default)", nameFlag, defFlag)
	case named:
		return &kadm.ClientQuotaEntityComponent{Type: typ, Name: &name}, nil
	case def:
		return &kadm.ClientQuotaEntityComponent{Type: typ}, nil
	}
	return nil, nil
}

// entity is the entity the flags name, in the order user, client-id, ip.
func (f *quotaEntityFlags) entity(cmd *cobra.Command) (kadm.ClientQuotaEntity, error) {
	var e kadm.ClientQuotaEntity
	for _, p := range []struct {
		typ, nameFlag, name, defFlag string
		def                          bool
	}{
		{"user", "user", f.user, "user-defaults", f.userDefaults},
		{"client-id", "client", f.client, "client-defaults", f.clientDefaults},
		{"ip", "ip", f.ip, "ip-defaults", f.ipDefaults},
	} {
		c, err := quotaPart(cmd, p.typ, p.nameFlag, p.name, p.defFlag, p.def)
		if err != nil {
			return nil, err
		}
		if c != nil {
			e = append(e, *c)
		}
	}
	return e, nil
}

func newQuotaCommand() *cobra.Command {
	var cf clientFlags
	cmd := &cobra.Command{
		Use:   "quota",
		Short: "Set, describe and remove client quotas (byte rates, request percentage)",
		Long: `Client quotas bound what a user, a client id, a client id of a user, or an
IP address may use of each broker: producer_byte_rate and consumer_byte_rate
(bytes a second), request_percentage (percent of one thread's time),
controller_mutation_rate, and for IPs connection_creation_rate. A client over
its quota is throttled: its answers carry throttle_time_ms and the broker
reads nothing more from it for that long.`,
	}
	cf.register(cmd)
	cmd.AddCommand(newQuotaSetCommand(&cf), newQuotaDescribeCommand(&cf), newQuotaRemoveCommand(&cf))
	return cmd
}

// quotaAlterResult is what set and remove print as JSON.
type quotaAlterResult struct {
	Entity  string             `json:"entity"`
	Set     map[string]float64 `json:"set,omitempty"`
	Removed []string           `json:"removed,omitempty"`
}

func newQuotaSetCommand(cf *clientFlags) *cobra.Command {
	var (
		ef   quotaEntityFlags
		adds []string
	)
	cmd := &cobra.Command{
		Use:          "set (--user U | --user-defaults) (--client C | --client-defaults) (--ip A | --ip-defaults) --add-config K=V[,K=V...]",
		Short:        "Set quota values of an entity (kafka-configs --alter --add-config)",
		Args:         cobra.NoArgs,
		SilenceUsage: true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			e, err := ef.entity(cmd)
			if err != nil {
				return err
			}
			kvs, err := parseKeyValues(adds)
			if err != nil {
				return fmt.Errorf("--add-config %w", err)
			}
			if len(kvs) == 0 {
				return errors.New("--add-config: give at least one KEY=VALUE")
			}
			set := make(map[string]float64, len(kvs))
			var ops []kadm.AlterClientQuotaOp
			for _, k := range sortedKeys(kvs) {
				v, err := strconv.ParseFloat(kvs[k], 64)
				if err != nil {
					return fmt.Errorf("--add-config %s=%s: not a number", k, kvs[k])
				}
				set[k] = v
				ops = append(ops, kadm.AlterClientQuotaOp{Key: k, Value: v})
			}
			return alterQuota(cmd, cf, e, ops, quotaAlterResult{Entity: e.String(), Set: set})
		},
	}
	ef.register(cmd)
	cmd.Flags().StringSliceVar(&adds, "add-config", nil, "quota values to set, KEY=VALUE[,KEY=VALUE...]")
	return cmd
}

func newQuotaRemoveCommand(cf *clientFlags) *cobra.Command {
	var (
		ef   quotaEntityFlags
		dels []string
	)
	cmd := &cobra.Command{
		Use:          "remove (--user U | --user-defaults) (--client C | --client-defaults) (--ip A | --ip-defaults) --delete-config K[,K...]",
		Short:        "Remove quota values of an entity (kafka-configs --alter --delete-config)",
		Args:         cobra.NoArgs,
		SilenceUsage: true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			e, err := ef.entity(cmd)
			if err != nil {
				return err
			}
			if len(dels) == 0 {
				return errors.New("--delete-config: give at least one KEY")
			}
			var ops []kadm.AlterClientQuotaOp
			for _, k := range dels {
				ops = append(ops, kadm.AlterClientQuotaOp{Key: k, Remove: true})
			}
			return alterQuota(cmd, cf, e, ops, quotaAlterResult{Entity: e.String(), Removed: dels})
		},
	}
	ef.register(cmd)
	cmd.Flags().StringSliceVar(&dels, "delete-config", nil, "quota keys to remove, KEY[,KEY...]")
	return cmd
}

// alterQuota sends one AlterClientQuotas entry and reports its outcome.
func alterQuota(cmd *cobra.Command, cf *clientFlags, e kadm.ClientQuotaEntity, ops []kadm.AlterClientQuotaOp, res quotaAlterResult) error {
	return adminRun(cmd, cf, func(ctx context.Context, adm *kadm.Client, format string) error {
		altered, err := adm.AlterClientQuotas(ctx, []kadm.AlterClientQuotaEntry{{Entity: e, Ops: ops}})
		if err != nil {
			return fmt.Errorf("altering quotas of %s: %w", e, err)
		}
		if len(altered) != 1 {
			return fmt.Errorf("altering quotas of %s: the broker answered %d entities", e, len(altered))
		}
		if a := altered[0]; a.Err != nil {
			return fmt.Errorf("altering quotas of %s: %s", e, kafkaErrorText(a.Err, a.ErrMessage))
		}
		if format == outputJSON {
			return writeJSON(cmd.OutOrStdout(), res)
		}
		_, err = fmt.Fprintf(cmd.OutOrStdout(), "Completed updating quotas of %s.\n", e)
		return err
	})
}

// QuotaEntry is one entity's quotas as `gregor quota describe -o json` prints them.
type QuotaEntry struct {
	Entity string             `json:"entity"`
	Values map[string]float64 `json:"values"`
}

func newQuotaDescribeCommand(cf *clientFlags) *cobra.Command {
	var (
		ef     quotaEntityFlags
		strict bool
	)
	cmd := &cobra.Command{
		Use:   "describe [--user U | --user-defaults] [--client C | --client-defaults] [--ip A | --ip-defaults] [--strict]",
		Short: "Describe client quotas (kafka-configs --describe)",
		Long: `Describe the quotas of the entities that match: each --user/--client/--ip
matches that name, each --*-defaults the default entity of the type; an entity
matches when it has every type given (and, with --strict, no other). With no
entity flags every quota is listed.`,
		Args:         cobra.NoArgs,
		SilenceUsage: true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			e, err := ef.entity(cmd)
			if err != nil {
				return err
			}
			var filter []kadm.DescribeClientQuotaComponent
			for _, c := range e {
				dc := kadm.DescribeClientQuotaComponent{Type: c.Type, MatchName: c.Name, MatchType: 0}
				if c.Name == nil {
					dc.MatchType = 1
				}
				filter = append(filter, dc)
			}
			return adminRun(cmd, cf, func(ctx context.Context, adm *kadm.Client, format string) error {
				described, err := adm.DescribeClientQuotas(ctx, strict, filter)
				if err != nil {
					var em *kadm.ErrAndMessage
					if errors.As(err, &em) {
						return fmt.Errorf("describing quotas: %s", kafkaErrorText(em.Err, em.ErrMessage))
					}
					return fmt.Errorf("describing quotas: %w", err)
				}
				entries := make([]QuotaEntry, 0, len(described))
				for _, d := range described {
					q := QuotaEntry{Entity: d.Entity.String(), Values: map[string]float64{}}
					for _, v := range d.Values {
						q.Values[v.Key] = v.Value
					}
					entries = append(entries, q)
				}
				sort.Slice(entries, func(i, j int) bool { return entries[i].Entity < entries[j].Entity })
				if format == outputJSON {
					return writeJSON(cmd.OutOrStdout(), entries)
				}
				t := newTable(cmd.OutOrStdout(), "ENTITY", "KEY", "VALUE")
				for _, q := range entries {
					for _, k := range sortedKeys(q.Values) {
						t.row(q.Entity, k, strconv.FormatFloat(q.Values[k], 'f', -1, 64))
					}
				}
				return t.flush()
			})
		},
	}
	ef.register(cmd)
	cmd.Flags().BoolVar(&strict, "strict", false, "match only entities with no entity type beyond those given")
	return cmd
}
