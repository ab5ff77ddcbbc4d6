package cli

import (
	"context"
	"fmt"
	"io"
	"slices"
	"sort"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// `gregor acl add|list|remove`: Kafka's kafka-acls.sh --add, --list and --remove, with
// its flag names. ACLs need an authorizer on the brokers (authorizer.class.name);
// without one every call fails with SECURITY_DISABLED.

func newACLCommand() *cobra.Command {
	var cf clientFlags
	cmd := &cobra.Command{
		Use:   "acl",
		Short: "Add, list and remove ACLs (kafka-acls.sh)",
	}
	cf.register(cmd)
	cmd.AddCommand(newACLAddCommand(&cf), newACLListCommand(&cf), newACLRemoveCommand(&cf))
	return cmd
}

// aclFlags are kafka-acls.sh's resource, principal, host and operation flags.
type aclFlags struct {
	allowPrincipals, denyPrincipals []string
	allowHosts, denyHosts           []string
	principals                      []string // list and remove: either permission
	operations                      []string
	topics, groups, txnIDs          []string
	tokens, users                   []string // DELEGATION_TOKEN ids, USER principals
	cluster                         bool
	patternType                     string
}

func (f *aclFlags) register(cmd *cobra.Command, filter bool) {
	fl := cmd.Flags()
	fl.StringArrayVar(&f.allowPrincipals, "allow-principal", nil, "principal (Type:Name, e.g. User:alice, User:* for everyone) allowed the operations; repeatable")
	fl.StringArrayVar(&f.denyPrincipals, "deny-principal", nil, "principal denied the operations; repeatable")
	fl.StringArrayVar(&f.allowHosts, "allow-host", nil, "host the allowed principals may connect from (default * when adding)")
	fl.StringArrayVar(&f.denyHosts, "deny-host", nil, "host the denied principals are denied from (default * when adding)")
	fl.StringArrayVar(&f.operations, "operation", nil, "operation: All, Read, Write, Create, Delete, Alter, Describe, ClusterAction, DescribeConfigs, AlterConfigs, IdempotentWrite, CreateTokens, DescribeTokens (default All when adding, any when filtering); repeatable")
	fl.StringArrayVar(&f.topics, "topic", nil, "topic the ACLs are for (* for every topic); repeatable")
	fl.StringArrayVar(&f.groups, "group", nil, "consumer group the ACLs are for; repeatable")
	fl.StringArrayVar(&f.txnIDs, "transactional-id", nil, "transactional id the ACLs are for; repeatable")
	fl.StringArrayVar(&f.tokens, "delegation-token", nil, "delegation token id the ACLs are for (Describe); repeatable")
	fl.StringArrayVar(&f.users, "user-principal", nil, "user the ACLs are for, as a resource (CreateTokens, DescribeTokens: User:NAME); repeatable")
	fl.BoolVar(&f.cluster, "cluster", false, "the ACLs are for the cluster")
	patternHelp := "resource pattern type: literal or prefixed"
	if filter {
		patternHelp = "resource pattern type to match: literal, prefixed, any (any pattern, exact name) or match (every ACL that applies to the named resources)"
		fl.StringArrayVar(&f.principals, "principal", nil, "principal whose ACLs (allow or deny) to select; repeatable")
	}
	fl.StringVar(&f.patternType, "resource-pattern-type", "literal", patternHelp)
}

func (f *aclFlags) hasResource() bool {
	return len(f.topics) > 0 || len(f.groups) > 0 || len(f.txnIDs) > 0 || len(f.tokens) > 0 || len(f.users) > 0 || f.cluster
}

// kadmResource reports whether a resource flag other than --user-principal is set: kadm's
// builder has no USER resources, which userACLs handles.
func (f *aclFlags) kadmResource() bool {
	return len(f.topics) > 0 || len(f.groups) > 0 || len(f.txnIDs) > 0 || len(f.tokens) > 0 || f.cluster
}

// builder turns the flags into kadm's ACL builder: for adding (filter false) every flag is
// a value, for listing and removing an unset flag matches anything.
func (f *aclFlags) builder(filter bool) (*kadm.ACLBuilder, error) {
	pattern, err := kmsg.ParseACLResourcePatternType(f.patternType)
	if err != nil {
		return nil, fmt.Errorf("--resource-pattern-type %q: %w", f.patternType, err)
	}
	b := kadm.NewACLs().ResourcePatternType(pattern)
	var ops []kadm.ACLOperation
	for _, s := range f.operations {
		op, err := kmsg.ParseACLOperation(s)
		if err != nil {
			return nil, fmt.Errorf("--operation %q: %w", s, err)
		}
		ops = append(ops, op)
	}
	if !filter {
		if pattern != kadm.ACLPatternLiteral && pattern != kadm.ACLPatternPrefixed {
			return nil, fmt.Errorf("--resource-pattern-type %s: ACLs are added as literal or prefixed", f.patternType)
		}
		if !f.hasResource() {
			return nil, fmt.Errorf("give a resource: --topic, --group, --transactional-id, --delegation-token, --user-principal or --cluster")
		}
		if len(f.allowPrincipals) == 0 && len(f.denyPrincipals) == 0 {
			return nil, fmt.Errorf("give --allow-principal or --deny-principal")
		}
		if len(ops) == 0 {
			ops = []kadm.ACLOperation{kadm.OpAll}
		}
		b.MaybeAllow(f.allowPrincipals...).MaybeAllowHosts(f.allowHosts...).MaybeDeny(f.denyPrincipals...).MaybeDenyHosts(f.denyHosts...)
		if len(f.allowPrincipals) > 0 && len(f.allowHosts) == 0 {
			b.AllowHosts("*")
		}
		if len(f.denyPrincipals) > 0 && len(f.denyHosts) == 0 {
			b.DenyHosts("*")
		}
	} else {
		allow := append(append([]string(nil), f.allowPrincipals...), f.principals...)
		deny := append(append([]string(nil), f.denyPrincipals...), f.principals...)
		switch {
		case len(f.allowPrincipals) == 0 && len(f.denyPrincipals) == 0 && len(f.principals) == 0:
			b.Allow().Deny()
		case len(f.denyPrincipals) == 0 && len(f.principals) == 0:
			b.Allow(allow...).MaybeDeny()
		case len(f.allowPrincipals) == 0 && len(f.principals) == 0:
			b.MaybeAllow().Deny(deny...)
		default:
			b.Allow(allow...).Deny(deny...)
		}
		b.AllowHosts(f.allowHosts...).DenyHosts(f.denyHosts...)
		if len(ops) == 0 {
			ops = []kadm.ACLOperation{kadm.OpAny}
		}
	}
	b.Operations(ops...)
	if filter && (!f.hasResource() || len(f.users) > 0) {
		b.AnyResource() // USER resources are picked out of every ACL (userACLs)
		return b, nil
	}
	if len(f.topics) > 0 {
		b.Topics(f.topics...)
	}
	if len(f.groups) > 0 {
		b.Groups(f.groups...)
	}
	if len(f.txnIDs) > 0 {
		b.TransactionalIDs(f.txnIDs...)
	}
	if len(f.tokens) > 0 {
		b.DelegationTokens(f.tokens...)
	}
	if f.cluster {
		b.Clusters()
	}
	return b, nil
}

// aclRow is one ACL as the tools print it.
type aclRow struct {
	ResourceType string `json:"resource_type"`
	Name         string `json:"name"`
	PatternType  string `json:"pattern_type"`
	Principal    string `json:"principal"`
	Host         string `json:"host"`
	Operation    string `json:"operation"`
	Permission   string `json:"permission"`
}

func printACLs(w io.Writer, format string, rows []aclRow) error {
	sort.Slice(rows, func(i, j int) bool {
		a, b := rows[i], rows[j]
		if a.ResourceType+a.Name+a.PatternType != b.ResourceType+b.Name+b.PatternType {
			return a.ResourceType+"\x00"+a.Name+"\x00"+a.PatternType < b.ResourceType+"\x00"+b.Name+"\x00"+b.PatternType
		}
		return a.Principal+"\x00"+a.Host+"\x00"+a.Operation+"\x00"+a.Permission < b.Principal+"\x00"+b.Host+"\x00"+b.Operation+"\x00"+b.Permission
	})
	if format == outputJSON {
		if rows == nil {
			rows = []aclRow{}
		}
		return writeJSON(w, rows)
	}
	t := newTable(w, "RESOURCE-TYPE", "NAME", "PATTERN", "PRINCIPAL", "HOST", "OPERATION", "PERMISSION")
	for _, r := range rows {
		t.row(r.ResourceType, r.Name, r.PatternType, r.Principal, r.Host, r.Operation, r.Permission)
	}
	return t.flush()
}

func newACLAddCommand(cf *clientFlags) *cobra.Command {
	var f aclFlags
	cmd := &cobra.Command{
		Use:          "add",
		Short:        "Add ACLs: every principal gets every operation on every resource given",
		Args:         cobra.NoArgs,
		SilenceUsage: true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			b, err := f.builder(false)
			if err != nil {
				return err
			}
			return adminClientRun(cmd, cf, func(ctx context.Context, adm *kadm.Client, cl *kgo.Client, format string) error {
				var rows []aclRow
				if len(f.users) > 0 {
					var err error
					if rows, err = f.addUserACLs(ctx, cl); err != nil {
						return err
					}
				}
				if !f.kadmResource() {
					return printACLs(cmd.OutOrStdout(), format, rows)
				}
				rs, err := adm.CreateACLs(ctx, b)
				if err != nil {
					return fmt.Errorf("adding ACLs: %w", err)
				}
				for _, r := range rs {
					if r.Err != nil {
						return fmt.Errorf("adding ACL for %s on %s %s: %s", r.Principal, r.Type, r.Name, kafkaErrorText(r.Err, r.ErrMessage))
					}
					rows = append(rows, aclRow{r.Type.String(), r.Name, r.Pattern.String(), r.Principal, r.Host, r.Operation.String(), r.Permission.String()})
				}
				return printACLs(cmd.OutOrStdout(), format, rows)
			})
		},
	}
	f.register(cmd, false)
	return cmd
}

func newACLListCommand(cf *clientFlags) *cobra.Command {
	var f aclFlags
	cmd := &cobra.Command{
		Use:          "list",
		Short:        "List ACLs (every ACL without filters; --resource-pattern-type match lists those that apply to a resource)",
		Args:         cobra.NoArgs,
		SilenceUsage: true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if !cmd.Flags().Changed("resource-pattern-type") && !f.hasResource() {
				f.patternType = "any"
			}
			if len(f.users) > 0 && f.kadmResource() {
				return fmt.Errorf("--user-principal selects USER resources alone: list other resources in another call")
			}
			b, err := f.builder(true)
			if err != nil {
				return err
			}
			return adminRun(cmd, cf, func(ctx context.Context, adm *kadm.Client, format string) error {
				rs, err := adm.DescribeACLs(ctx, b)
				if err != nil {
					return fmt.Errorf("listing ACLs: %w", err)
				}
				var rows []aclRow
				seen := map[aclRow]bool{}
				for _, r := range rs {
					if r.Err != nil {
						return fmt.Errorf("listing ACLs: %s", kafkaErrorText(r.Err, r.ErrMessage))
					}
					for _, d := range r.Described {
						row := aclRow{d.Type.String(), d.Name, d.Pattern.String(), d.Principal, d.Host, d.Operation.String(), d.Permission.String()}
						if len(f.users) > 0 && !f.userACL(d.Type, d.Name) {
							continue
						}
						if !seen[row] { // several filters may find one ACL
							seen[row] = true
							rows = append(rows, row)
						}
					}
				}
				return printACLs(cmd.OutOrStdout(), format, rows)
			})
		},
	}
	f.register(cmd, true)
	return cmd
}

func newACLRemoveCommand(cf *clientFlags) *cobra.Command {
	var f aclFlags
	var all bool
	cmd := &cobra.Command{
		Use:          "remove",
		Short:        "Remove the ACLs the flags select, and list them",
		Args:         cobra.NoArgs,
		SilenceUsage: true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if !f.hasResource() && !all {
				return fmt.Errorf("give a resource (--topic, --group, --transactional-id, --delegation-token, --user-principal, --cluster), or --all to remove from every resource")
			}
			if len(f.users) > 0 && f.kadmResource() {
				return fmt.Errorf("--user-principal selects USER resources alone: remove other resources in another call")
			}
			b, err := f.builder(true)
			if err != nil {
				return err
			}
			if len(f.users) > 0 {
				return adminClientRun(cmd, cf, func(ctx context.Context, adm *kadm.Client, cl *kgo.Client, format string) error {
					rows, err := f.removeUserACLs(ctx, adm, cl, b)
					if err != nil {
						return err
					}
					return printACLs(cmd.OutOrStdout(), format, rows)
				})
			}
			return adminRun(cmd, cf, func(ctx context.Context, adm *kadm.Client, format string) error {
				rs, err := adm.DeleteACLs(ctx, b)
				if err != nil {
					return fmt.Errorf("removing ACLs: %w", err)
				}
				var rows []aclRow
				seen := map[aclRow]bool{}
				for _, r := range rs {
					if r.Err != nil {
						return fmt.Errorf("removing ACLs: %s", kafkaErrorText(r.Err, r.ErrMessage))
					}
					for _, d := range r.Deleted {
						if d.Err != nil {
							return fmt.Errorf("removing ACLs: %s", kafkaErrorText(d.Err, d.ErrMessage))
						}
						row := aclRow{d.Type.String(), d.Name, d.Pattern.String(), d.Principal, d.Host, d.Operation.String(), d.Permission.String()}
						if !seen[row] {
							seen[row] = true
							rows = append(rows, row)
						}
					}
				}
				return printACLs(cmd.OutOrStdout(), format, rows)
			})
		},
	}
	f.register(cmd, true)
	cmd.Flags().BoolVar(&all, "all", false, "with no resource flag: remove from every resource")
	return cmd
}

// userACL reports whether an ACL's resource is one of the --user-principal users.
func (f *aclFlags) userACL(rt kmsg.ACLResourceType, name string) bool {
	return rt == kmsg.ACLResourceTypeUser && slices.Contains(f.users, name)
}

// addUserACLs creates the ACLs of the --user-principal resources (kadm's builder has no USER
// resources): every principal, host and operation of the flags, as the builder combines them.
func (f *aclFlags) addUserACLs(ctx context.Context, cl *kgo.Client) ([]aclRow, error) {
	pattern, err := kmsg.ParseACLResourcePatternType(f.patternType)
	if err != nil {
		return nil, err
	}
	ops := []kmsg.ACLOperation{kmsg.ACLOperationAll}
	if len(f.operations) > 0 {
		ops = ops[:0]
		for _, s := range f.operations {
			op, err := kmsg.ParseACLOperation(s)
			if err != nil {
				return nil, fmt.Errorf("--operation %q: %w", s, err)
			}
			ops = append(ops, op)
		}
	}
	orStar := func(hosts []string) []string {
		if len(hosts) == 0 {
			return []string{"*"}
		}
		return hosts
	}
	req := kmsg.NewPtrCreateACLsRequest()
	add := func(principals, hosts []string, perm kmsg.ACLPermissionType) {
		for _, u := range f.users {
			for _, p := range principals {
				for _, h := range orStar(hosts) {
					for _, op := range ops {
						c := kmsg.NewCreateACLsRequestCreation()
						c.ResourceType, c.ResourceName, c.ResourcePatternType = kmsg.ACLResourceTypeUser, u, pattern
						c.Principal, c.Host, c.Operation, c.PermissionType = p, h, op, perm
						req.Creations = append(req.Creations, c)
					}
				}
			}
		}
	}
	add(f.allowPrincipals, f.allowHosts, kmsg.ACLPermissionTypeAllow)
	add(f.denyPrincipals, f.denyHosts, kmsg.ACLPermissionTypeDeny)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return nil, fmt.Errorf("adding ACLs: %w", err)
	}
	var rows []aclRow
	for i, r := range resp.Results {
		c := req.Creations[i]
		if err := kerr.ErrorForCode(r.ErrorCode); err != nil {
			return nil, fmt.Errorf("adding ACL for %s on USER %s: %s", c.Principal, c.ResourceName, kafkaErrorText(err, derefString(r.ErrorMessage)))
		}
		rows = append(rows, aclRow{c.ResourceType.String(), c.ResourceName, c.ResourcePatternType.String(), c.Principal, c.Host, c.Operation.String(), c.PermissionType.String()})
	}
	return rows, nil
}

// removeUserACLs removes the ACLs on the --user-principal resources that b's principals,
// hosts and operations select: found among every ACL, then deleted one by one.
func (f *aclFlags) removeUserACLs(ctx context.Context, adm *kadm.Client, cl *kgo.Client, b *kadm.ACLBuilder) ([]aclRow, error) {
	rs, err := adm.DescribeACLs(ctx, b)
	if err != nil {
		return nil, fmt.Errorf("removing ACLs: %w", err)
	}
	req := kmsg.NewPtrDeleteACLsRequest()
	var rows []aclRow
	seen := map[aclRow]bool{}
	for _, r := range rs {
		if r.Err != nil {
			return nil, fmt.Errorf("removing ACLs: %s", kafkaErrorText(r.Err, r.ErrMessage))
		}
		for _, d := range r.Described {
			row := aclRow{d.Type.String(), d.Name, d.Pattern.String(), d.Principal, d.Host, d.Operation.String(), d.Permission.String()}
			if !f.userACL(d.Type, d.Name) || seen[row] {
				continue
			}
			seen[row] = true
			rows = append(rows, row)
			df := kmsg.NewDeleteACLsRequestFilter()
			name, principal, host := d.Name, d.Principal, d.Host
			df.ResourceType, df.ResourceName, df.ResourcePatternType = d.Type, &name, d.Pattern
			df.Principal, df.Host, df.Operation, df.PermissionType = &principal, &host, d.Operation, d.Permission
			req.Filters = append(req.Filters, df)
		}
	}
	if len(req.Filters) == 0 {
		return rows, nil
	}
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return nil, fmt.Errorf("removing ACLs: %w", err)
	}
	for _, r := range resp.Results {
		if err := kerr.ErrorForCode(r.ErrorCode); err != nil {
			return nil, fmt.Errorf("removing ACLs: %s", kafkaErrorText(err, derefString(r.ErrorMessage)))
		}
	}
	return rows, nil
}
