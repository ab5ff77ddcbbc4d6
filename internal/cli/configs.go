package cli

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// `gregor configs describe|alter`: kafka-configs.sh. An entity is named as kafka-configs.sh
// names it, with --entity-type (topics, brokers, groups, users, clients) and --entity-name
// or --entity-default, or with the shorthands --topic, --broker, --broker-defaults, --group,
// --user, --user-defaults, --client, --client-defaults. A user and a client id may be named together
// (the quota of that client id of that user).
//
// Topics, brokers and groups are configs proper (DescribeConfigs, IncrementalAlterConfigs;
// groups in configs_groups.go); the broker default (--entity-default, --broker-defaults) is the cluster-wide dynamic config
// every broker falls back to. Users and clients have no configs of their own: as in
// kafka-configs.sh their keys are client quotas (DescribeClientQuotas/AlterClientQuotas)
// and, for a user, SCRAM credentials (SCRAM-SHA-256=[iterations=N,password=P];
// DescribeUserScramCredentials/AlterUserScramCredentials).
//
//	gregor configs describe --topic orders [--all]
//	gregor configs describe --entity-type brokers --entity-default
//	gregor configs alter --broker 1 --add-config log.cleaner.threads=2
//	gregor configs alter --entity-type groups --entity-name workers --add-config share.auto.offset.reset=earliest
//	gregor configs alter --topic orders --add-config retention.ms=60000,cleanup.policy=[compact,delete] --delete-config segment.ms
//	gregor configs alter --user alice --add-config 'SCRAM-SHA-256=[iterations=8192,password=secret],producer_byte_rate=1024'

// Entity types of --entity-type, as kafka-configs.sh spells them.
const (
	entityTopics  = "topics"
	entityBrokers = "brokers"
	entityGroups  = "groups"
	entityUsers   = "users"
	entityClients = "clients"
)

// configEntity is what the entity flags name: a type and a name, or the type's default
// (isDefault), or with an empty name and no default every entity of the type (describe
// only). client is set besides a user entity when both a user and a client id are named.
type configEntity struct {
	typ       string
	name      string
	isDefault bool
	// client names the client id part of a user+client quota entity.
	client        *configEntity
	describeEvery bool
}

func (e configEntity) String() string {
	s := e.label()
	if e.client != nil {
		s += ", " + e.client.label()
	}
	return s
}

func (e configEntity) label() string {
	kind := map[string]string{entityTopics: "topic", entityBrokers: "broker", entityGroups: "group", entityUsers: "user-principal", entityClients: "client-id"}[e.typ]
	switch {
	case e.isDefault && e.typ == entityBrokers:
		return "default broker"
	case e.isDefault:
		return "the default " + kind
	}
	return fmt.Sprintf("%s '%s'", kind, e.name)
}

// configEntityFlags are the entity-naming flags of describe and alter.
type configEntityFlags struct {
	entityType, entityName                  string
	entityDefault                           bool
	topic, broker, group, user, client      string
	brokerDefaults, userDefaults, clientDef bool
}

func (f *configEntityFlags) register(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.StringVar(&f.entityType, "entity-type", "", "type of entity: topics, brokers, groups, users or clients")
	fl.StringVar(&f.entityName, "entity-name", "", "name of the entity (topic name, broker id, group id, user principal, client id)")
	fl.BoolVar(&f.entityDefault, "entity-default", false, "the default entity of --entity-type (brokers: the cluster-wide dynamic config)")
	fl.StringVar(&f.topic, "topic", "", "the topic (--entity-type topics --entity-name TOPIC)")
	fl.StringVar(&f.broker, "broker", "", "the broker id (--entity-type brokers --entity-name ID)")
	fl.BoolVar(&f.brokerDefaults, "broker-defaults", false, "the cluster-wide dynamic broker config (--entity-type brokers --entity-default)")
	fl.StringVar(&f.group, "group", "", "the consumer or share group (--entity-type groups --entity-name GROUP)")
	fl.StringVar(&f.user, "user", "", "the user principal (--entity-type users --entity-name USER)")
	fl.BoolVar(&f.userDefaults, "user-defaults", false, "the default user (--entity-type users --entity-default)")
	fl.StringVar(&f.client, "client", "", "the client id (--entity-type clients --entity-name CLIENT)")
	fl.BoolVar(&f.clientDef, "client-defaults", false, "the default client id (--entity-type clients --entity-default)")
	_ = cmd.RegisterFlagCompletionFunc("entity-type", cobra.FixedCompletions(
		[]string{entityTopics, entityBrokers, entityGroups, entityUsers, entityClients}, cobra.ShellCompDirectiveNoFileComp))
	_ = cmd.RegisterFlagCompletionFunc("topic", completeTopics)
	_ = cmd.RegisterFlagCompletionFunc("group", completeGroups)
	_ = cmd.RegisterFlagCompletionFunc("entity-name", completeEntityName)
}

// completeEntityName completes --entity-name from the cluster for --entity-type topics,
// brokers and groups (users and clients have no cheap listing).
func completeEntityName(cmd *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
	switch cmd.Flag("entity-type").Value.String() {
	case entityTopics:
		return completeTopics(cmd, args, toComplete)
	case entityGroups:
		return completeGroups(cmd, args, toComplete)
	case entityBrokers:
		return completeNames(cmd, toComplete, func(ctx context.Context, adm *kadm.Client) ([]string, error) {
			bs, err := adm.ListBrokers(ctx)
			if err != nil {
				return nil, err
			}
			var ids []string
			for _, id := range bs.NodeIDs() {
				ids = append(ids, strconv.Itoa(int(id)))
			}
			return ids, nil
		})
	}
	return nil, cobra.ShellCompDirectiveNoFileComp
}

// entity resolves the flags into one entity. forAlter requires a name or a default.
func (f *configEntityFlags) entity(cmd *cobra.Command, forAlter bool) (configEntity, error) {
	changed := cmd.Flags().Changed
	var parts []configEntity
	add := func(typ, name string, named, def bool) {
		if named || def {
			parts = append(parts, configEntity{typ: typ, name: name, isDefault: def})
		}
	}
	add(entityTopics, f.topic, changed("topic"), false)
	add(entityBrokers, f.broker, changed("broker"), f.brokerDefaults)
	add(entityGroups, f.group, changed("group"), false)
	add(entityUsers, f.user, changed("user"), f.userDefaults)
	add(entityClients, f.client, changed("client"), f.clientDef)
	if f.entityType != "" {
		switch f.entityType {
		case entityTopics, entityBrokers, entityGroups, entityUsers, entityClients:
		default:
			return configEntity{}, fmt.Errorf("--entity-type %q: want topics, brokers, groups, users or clients", f.entityType)
		}
		if f.entityType == entityGroups && f.entityDefault {
			return configEntity{}, errors.New("groups have no default entity: a group's keys default to the brokers' group.* configs")
		}
		if changed("entity-name") && f.entityDefault {
			return configEntity{}, errors.New("--entity-name and --entity-default name two entities: give one")
		}
		e := configEntity{typ: f.entityType, name: f.entityName, isDefault: f.entityDefault}
		e.describeEvery = !changed("entity-name") && !f.entityDefault
		parts = append(parts, e)
	} else if changed("entity-name") || f.entityDefault {
		return configEntity{}, errors.New("--entity-name and --entity-default need --entity-type")
	}
	for _, p := range parts {
		if !p.isDefault && !p.describeEvery && p.name == "" {
			return configEntity{}, fmt.Errorf("empty %s name (use the --*-defaults flag or --entity-default for the default)", p.typ)
		}
	}
	var e configEntity
	switch {
	case len(parts) == 0:
		return configEntity{}, errors.New("name an entity: --entity-type with --entity-name or --entity-default, or --topic, --broker, --broker-defaults, --group, --user, --user-defaults, --client, --client-defaults")
	case len(parts) == 1:
		e = parts[0]
	case len(parts) == 2 && parts[0].typ == entityClients && parts[1].typ == entityUsers:
		e = parts[1]
		c := parts[0]
		e.client = &c
	case len(parts) == 2 && parts[0].typ == entityUsers && parts[1].typ == entityClients:
		e = parts[0]
		c := parts[1]
		e.client = &c
	default:
		return configEntity{}, errors.New("the flags name several entities: give one (a user and a client id may go together)")
	}
	if forAlter && (e.describeEvery || (e.client != nil && e.client.describeEvery)) {
		return configEntity{}, errors.New("alter needs --entity-name or --entity-default")
	}
	if e.typ == entityBrokers && !e.isDefault && !e.describeEvery {
		if _, err := strconv.ParseInt(e.name, 10, 32); err != nil {
			return configEntity{}, fmt.Errorf("broker %q: want a broker id", e.name)
		}
	}
	return e, nil
}

func newConfigsCommand() *cobra.Command {
	var cf clientFlags
	cmd := &cobra.Command{
		Use:   "configs",
		Short: "Describe and alter configs of topics, brokers, groups, users and clients (kafka-configs.sh)",
		Long: `Describe and alter the dynamic configs of topics, brokers (and the
cluster-wide broker default) and consumer or share groups, and the client quotas and
SCRAM credentials of users and client ids, as kafka-configs.sh does. Each config is shown
with its source (DYNAMIC_TOPIC_CONFIG, DYNAMIC_BROKER_CONFIG,
DYNAMIC_DEFAULT_BROKER_CONFIG, GROUP_CONFIG, STATIC_BROKER_CONFIG, DEFAULT_CONFIG) and whether it is sensitive (a sensitive value is
never sent back: it shows as null).`,
	}
	cf.register(cmd)
	cmd.AddCommand(newConfigsDescribeCommand(&cf), newConfigsAlterCommand(&cf))
	return cmd
}

// ConfigEntry is one config as `gregor configs describe -o json` prints it.
type ConfigEntry struct {
	Name      string          `json:"name"`
	Value     *string         `json:"value"`
	Source    string          `json:"source"`
	Sensitive bool            `json:"sensitive"`
	Synonyms  []ConfigSynonym `json:"synonyms,omitempty"`
}

// ConfigSynonym is where else a config's value could come from, in order of precedence.
type ConfigSynonym struct {
	Name   string  `json:"name"`
	Value  *string `json:"value"`
	Source string  `json:"source"`
}

// ConfigsDescription is one entity's configs as `gregor configs describe -o json` prints them.
type ConfigsDescription struct {
	EntityType string        `json:"entity_type"`
	EntityName string        `json:"entity_name"` // "" for the default entity
	Default    bool          `json:"default,omitempty"`
	Configs    []ConfigEntry `json:"configs"`
	// Quotas and Scram are set for users and clients.
	Quotas map[string]float64 `json:"quotas,omitempty"`
	Scram  map[string]int32   `json:"scram,omitempty"` // mechanism -> iterations
	header string
}

func newConfigsDescribeCommand(cf *clientFlags) *cobra.Command {
	var (
		ef  configEntityFlags
		all bool
	)
	cmd := &cobra.Command{
		Use:   "describe (--entity-type T [--entity-name N | --entity-default] | --topic T | --broker ID | --broker-defaults | --group G | --user U | --client C ...) [--all]",
		Short: "Describe the configs of an entity, or of every entity of a type (kafka-configs.sh --describe)",
		Long: `Without --all only what was set dynamically is shown: a topic's overrides, a
broker's own dynamic configs (or the cluster-wide default's), a group's overrides, as
kafka-configs.sh does;
--all lists every config with its source and synonyms. With --entity-type and no name,
every entity of the type is described.`,
		Args:         cobra.NoArgs,
		SilenceUsage: true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			e, err := ef.entity(cmd, false)
			if err != nil {
				return err
			}
			return adminClientRun(cmd, cf, func(ctx context.Context, adm *kadm.Client, cl *kgo.Client, format string) error {
				var descs []ConfigsDescription
				switch e.typ {
				case entityTopics, entityBrokers:
					descs, err = describeResourceConfigs(ctx, adm, e, all)
				case entityGroups:
					descs, err = describeGroupConfigs(ctx, adm, cl, e, all)
				default:
					descs, err = describeQuotaConfigs(ctx, adm, e)
				}
				if err != nil {
					return err
				}
				if format == outputJSON {
					if descs == nil {
						descs = []ConfigsDescription{}
					}
					return writeJSON(cmd.OutOrStdout(), descs)
				}
				return printConfigsDescriptions(cmd, descs, e)
			})
		},
	}
	ef.register(cmd)
	cmd.Flags().BoolVar(&all, "all", false, "list every config (with its source), not only the dynamic ones")
	return cmd
}

// describeResourceConfigs describes topics or brokers through DescribeConfigs.
func describeResourceConfigs(ctx context.Context, adm *kadm.Client, e configEntity, all bool) ([]ConfigsDescription, error) {
	var (
		rcs kadm.ResourceConfigs
		err error
	)
	if e.typ == entityTopics {
		names := []string{e.name}
		if e.describeEvery {
			topics, lerr := adm.ListTopics(ctx)
			if lerr != nil {
				return nil, fmt.Errorf("listing topics: %w", lerr)
			}
			names = topics.Names()
		}
		rcs, err = adm.DescribeTopicConfigs(ctx, names...)
	} else {
		var ids []int32
		switch {
		case e.describeEvery:
			bs, merr := adm.ListBrokers(ctx)
			if merr != nil {
				return nil, fmt.Errorf("listing brokers: %w", merr)
			}
			ids = bs.NodeIDs()
		case !e.isDefault:
			id, _ := strconv.ParseInt(e.name, 10, 32) // checked by entity
			ids = []int32{int32(id)}
		}
		rcs, err = adm.DescribeBrokerConfigs(ctx, ids...)
	}
	if err != nil {
		return nil, fmt.Errorf("describing configs of %s: %w", e, err)
	}
	sort.Slice(rcs, func(i, j int) bool { return lessEntityName(rcs[i].Name, rcs[j].Name) })
	out := make([]ConfigsDescription, 0, len(rcs))
	for _, rc := range rcs {
		if rc.Err != nil {
			return nil, fmt.Errorf("describing configs of %s %s: %s", e.typ, rc.Name, kafkaErrorText(rc.Err, rc.ErrMessage))
		}
		d := ConfigsDescription{EntityType: e.typ, EntityName: rc.Name, Default: e.typ == entityBrokers && rc.Name == "", Configs: []ConfigEntry{}}
		keep := func(s kmsg.ConfigSource) bool {
			switch {
			case all:
				return true
			case e.typ == entityTopics:
				return s == kmsg.ConfigSourceDynamicTopicConfig
			case d.Default:
				return s == kmsg.ConfigSourceDynamicDefaultBrokerConfig
			}
			return s == kmsg.ConfigSourceDynamicBrokerConfig
		}
		for _, c := range rc.Configs {
			if !keep(c.Source) {
				continue
			}
			ce := ConfigEntry{Name: c.Key, Value: c.Value, Source: c.Source.String(), Sensitive: c.Sensitive}
			for _, s := range c.Synonyms {
				ce.Synonyms = append(ce.Synonyms, ConfigSynonym{Name: s.Key, Value: s.Value, Source: s.Source.String()})
			}
			d.Configs = append(d.Configs, ce)
		}
		sort.Slice(d.Configs, func(i, j int) bool { return d.Configs[i].Name < d.Configs[j].Name })
		kind := "Dynamic"
		if all {
			kind = "All"
		}
		switch {
		case d.Default:
			d.header = kind + " configs for default broker are:"
		case e.typ == entityBrokers:
			d.header = fmt.Sprintf("%s configs for broker %s are:", kind, rc.Name)
		default:
			d.header = fmt.Sprintf("%s configs for topic %s are:", kind, rc.Name)
		}
		out = append(out, d)
	}
	return out, nil
}

// lessEntityName orders broker ids numerically and other names as strings.
func lessEntityName(a, b string) bool {
	x, errA := strconv.Atoi(a)
	y, errB := strconv.Atoi(b)
	if errA == nil && errB == nil {
		return x < y
	}
	return a < b
}

// quotaEntity is the client quota entity of a users/clients configEntity.
func (e configEntity) quotaEntity() kadm.ClientQuotaEntity {
	part := func(p configEntity) kadm.ClientQuotaEntityComponent {
		typ := "user"
		if p.typ == entityClients {
			typ = "client-id"
		}
		c := kadm.ClientQuotaEntityComponent{Type: typ}
		if !p.isDefault {
			name := p.name
			c.Name = &name
		}
		return c
	}
	ent := kadm.ClientQuotaEntity{part(e)}
	if e.client != nil {
		ent = append(ent, part(*e.client))
	}
	return ent
}

// describeQuotaConfigs describes users and clients: their quotas and, for a plain user
// entity, its SCRAM credentials.
func describeQuotaConfigs(ctx context.Context, adm *kadm.Client, e configEntity) ([]ConfigsDescription, error) {
	var filter []kadm.DescribeClientQuotaComponent
	parts := []configEntity{e}
	if e.client != nil {
		parts = append(parts, *e.client)
	}
	for _, p := range parts {
		typ := "user"
		if p.typ == entityClients {
			typ = "client-id"
		}
		c := kadm.DescribeClientQuotaComponent{Type: typ}
		switch {
		case p.describeEvery:
			c.MatchType = 2 // any entity of the type
		case p.isDefault:
			c.MatchType = 1
		default:
			name := p.name
			c.MatchName = &name
		}
		filter = append(filter, c)
	}
	described, err := adm.DescribeClientQuotas(ctx, true, filter)
	if err != nil {
		var em *kadm.ErrAndMessage
		if errors.As(err, &em) {
			return nil, fmt.Errorf("describing quotas of %s: %s", e, kafkaErrorText(em.Err, em.ErrMessage))
		}
		return nil, fmt.Errorf("describing quotas of %s: %w", e, err)
	}
	byEntity := map[string]*ConfigsDescription{}
	var order []string
	get := func(name string, def bool, header string) *ConfigsDescription {
		key := fmt.Sprintf("%s|%t", name, def)
		if d := byEntity[key]; d != nil {
			return d
		}
		d := &ConfigsDescription{EntityType: e.typ, EntityName: name, Default: def, Configs: []ConfigEntry{}, header: header}
		byEntity[key] = d
		order = append(order, key)
		return d
	}
	for _, q := range described {
		name, def := "", true
		if len(q.Entity) > 0 && q.Entity[0].Name != nil {
			name, def = *q.Entity[0].Name, false
		}
		label := q.Entity.String()
		d := get(label, def, "Quota configs for "+label+" are")
		d.EntityName = name
		if len(q.Entity) > 1 {
			d.EntityName = label
		}
		d.Quotas = map[string]float64{}
		for _, v := range q.Values {
			d.Quotas[v.Key] = v.Value
		}
	}
	if e.typ == entityUsers && e.client == nil && !e.isDefault {
		var users []string
		if !e.describeEvery {
			users = []string{e.name}
		}
		scrams, err := adm.DescribeUserSCRAMs(ctx, users...)
		if err != nil {
			return nil, fmt.Errorf("describing SCRAM credentials: %w", err)
		}
		for _, u := range scrams.Sorted() {
			if u.Err != nil {
				if errors.Is(u.Err, errResourceNotFound) {
					continue
				}
				return nil, fmt.Errorf("describing SCRAM credentials of %s: %s", u.User, kafkaErrorText(u.Err, u.ErrMessage))
			}
			d := get(fmt.Sprintf("{user=%s}", u.User), false, "")
			d.EntityName = u.User
			d.Scram = map[string]int32{}
			for _, c := range u.CredInfos {
				d.Scram[c.Mechanism.String()] = c.Iterations
			}
		}
	}
	sort.Strings(order)
	out := make([]ConfigsDescription, 0, len(order))
	for _, k := range order {
		out = append(out, *byEntity[k])
	}
	return out, nil
}

func printConfigsDescriptions(cmd *cobra.Command, descs []ConfigsDescription, e configEntity) error {
	w := cmd.OutOrStdout()
	if len(descs) == 0 {
		_, err := fmt.Fprintf(w, "No configs for %s.\n", e)
		return err
	}
	for _, d := range descs {
		if d.EntityType == entityUsers || d.EntityType == entityClients {
			label := d.EntityName
			if d.Default {
				label = "<default>"
			}
			if len(d.Quotas) > 0 {
				var kvs []string
				for _, k := range sortedKeys(d.Quotas) {
					kvs = append(kvs, k+"="+strconv.FormatFloat(d.Quotas[k], 'f', -1, 64))
				}
				fmt.Fprintf(w, "Quota configs for %s are %s\n", quotaLabel(d, label), strings.Join(kvs, ", "))
			}
			if len(d.Scram) > 0 {
				var kvs []string
				for _, k := range sortedKeys(d.Scram) {
					kvs = append(kvs, fmt.Sprintf("%s=iterations=%d", k, d.Scram[k]))
				}
				fmt.Fprintf(w, "SCRAM credential configs for user-principal '%s' are %s\n", d.EntityName, strings.Join(kvs, ", "))
			}
			continue
		}
		fmt.Fprintln(w, d.header)
		for _, c := range d.Configs {
			var syns []string
			for _, s := range c.Synonyms {
				syns = append(syns, fmt.Sprintf("%s:%s=%s", s.Source, s.Name, configValueText(s.Value, c.Sensitive)))
			}
			fmt.Fprintf(w, "  %s=%s sensitive=%t synonyms={%s}\n", c.Name, configValueText(c.Value, c.Sensitive), c.Sensitive, strings.Join(syns, ", "))
		}
	}
	return nil
}

// quotaLabel names a quota entity as kafka-configs.sh does: user-principal 'alice', the
// default client-id.
func quotaLabel(d ConfigsDescription, label string) string {
	if strings.HasPrefix(d.EntityName, "{") {
		return d.EntityName
	}
	kind := "user-principal"
	if d.EntityType == entityClients {
		kind = "client-id"
	}
	if d.Default {
		return "the default " + kind
	}
	return fmt.Sprintf("%s '%s'", kind, label)
}

// configValueText renders a value: null for a sensitive or absent one.
func configValueText(v *string, sensitive bool) string {
	if v == nil || sensitive {
		return "null"
	}
	return *v
}

// splitConfigList splits kafka-configs.sh's --add-config value at the commas that are not
// inside square brackets: k1=v1,k2=[a,b],k3=v3.
func splitConfigList(s string) ([]string, error) {
	var out []string
	depth, start := 0, 0
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '[':
			depth++
		case ']':
			depth--
			if depth < 0 {
				return nil, fmt.Errorf("%q: unbalanced ]", s)
			}
		case ',':
			if depth == 0 {
				out = append(out, s[start:i])
				start = i + 1
			}
		}
	}
	if depth != 0 {
		return nil, fmt.Errorf("%q: unbalanced [", s)
	}
	out = append(out, s[start:])
	var kept []string
	for _, x := range out {
		if x = strings.TrimSpace(x); x != "" {
			kept = append(kept, x)
		}
	}
	return kept, nil
}

// ConfigsAlterResult is what `gregor configs alter -o json` prints.
type ConfigsAlterResult struct {
	Entity  string            `json:"entity"`
	Set     map[string]string `json:"set,omitempty"`
	Deleted []string          `json:"deleted,omitempty"`
}

func newConfigsAlterCommand(cf *clientFlags) *cobra.Command {
	var (
		ef   configEntityFlags
		adds []string
		dels []string
	)
	cmd := &cobra.Command{
		Use:   "alter (--entity-type T (--entity-name N | --entity-default) | --topic T | --broker ID | --broker-defaults | --group G | --user U | --client C ...) [--add-config K=V,...] [--delete-config K,...]",
		Short: "Set or delete configs of an entity (kafka-configs.sh --alter)",
		Long: `Set (--add-config k1=v1,k2=[a,b]) and delete (--delete-config k1,k2) configs of one
entity. Topics, brokers and groups change through IncrementalAlterConfigs, so configs not
named keep their values; a broker key that cannot change at runtime is refused by the
broker. A group's keys are consumer.session.timeout.ms, consumer.heartbeat.interval.ms,
share.session.timeout.ms, share.heartbeat.interval.ms, share.record.lock.duration.ms and
share.auto.offset.reset (latest, earliest or by_duration:<ISO-8601 duration>) and
share.isolation.level (read_uncommitted, read_committed).
For users and clients the keys are client quotas (producer_byte_rate,
consumer_byte_rate, request_percentage, controller_mutation_rate) and, for a user,
SCRAM credentials: SCRAM-SHA-256=[iterations=8192,password=secret] (deleted with
--delete-config SCRAM-SHA-256).`,
		Args:         cobra.NoArgs,
		SilenceUsage: true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			e, err := ef.entity(cmd, true)
			if err != nil {
				return err
			}
			var items []string
			for _, a := range adds {
				parts, err := splitConfigList(a)
				if err != nil {
					return fmt.Errorf("--add-config %w", err)
				}
				items = append(items, parts...)
			}
			var delKeys []string
			for _, d := range dels {
				parts, err := splitConfigList(d)
				if err != nil {
					return fmt.Errorf("--delete-config %w", err)
				}
				delKeys = append(delKeys, parts...)
			}
			if len(items) == 0 && len(delKeys) == 0 {
				return errors.New("give --add-config and/or --delete-config")
			}
			return adminClientRun(cmd, cf, func(ctx context.Context, adm *kadm.Client, cl *kgo.Client, format string) error {
				var res ConfigsAlterResult
				var err error
				switch e.typ {
				case entityTopics, entityBrokers:
					res, err = alterResourceConfigs(ctx, adm, e, items, delKeys)
				case entityGroups:
					res, err = alterGroupConfigs(ctx, cl, e, items, delKeys)
				default:
					res, err = alterQuotaConfigs(ctx, adm, e, items, delKeys)
				}
				if err != nil {
					return err
				}
				if format == outputJSON {
					return writeJSON(cmd.OutOrStdout(), res)
				}
				_, err = fmt.Fprintf(cmd.OutOrStdout(), "Completed updating config for %s.\n", e)
				return err
			})
		},
	}
	ef.register(cmd)
	cmd.Flags().StringArrayVar(&adds, "add-config", nil, "configs to set: K=V[,K=V...]; a value holding commas goes in brackets, K=[a,b]")
	cmd.Flags().StringArrayVar(&dels, "delete-config", nil, "configs to delete: K[,K...]")
	return cmd
}

// alterResourceConfigs sends one IncrementalAlterConfigs for a topic or broker.
func alterResourceConfigs(ctx context.Context, adm *kadm.Client, e configEntity, items, dels []string) (ConfigsAlterResult, error) {
	res := ConfigsAlterResult{Entity: e.String(), Deleted: dels}
	var ops []kadm.AlterConfig
	if len(items) > 0 {
		res.Set = map[string]string{}
	}
	for _, it := range items {
		k, v, err := parseKeyValue(it)
		if err != nil {
			return res, fmt.Errorf("--add-config %w", err)
		}
		if strings.HasPrefix(v, "[") && strings.HasSuffix(v, "]") {
			v = v[1 : len(v)-1]
		}
		if _, dup := res.Set[k]; dup {
			return res, fmt.Errorf("--add-config: %q given more than once", k)
		}
		res.Set[k] = v
		ops = append(ops, kadm.AlterConfig{Op: kadm.SetConfig, Name: k, Value: kadm.StringPtr(v)})
	}
	for _, k := range dels {
		if _, both := res.Set[k]; both {
			return res, fmt.Errorf("%q is both set and deleted", k)
		}
		ops = append(ops, kadm.AlterConfig{Op: kadm.DeleteConfig, Name: k})
	}
	var (
		resps kadm.AlterConfigsResponses
		err   error
	)
	switch {
	case e.typ == entityTopics:
		resps, err = adm.AlterTopicConfigs(ctx, ops, e.name)
	case e.isDefault:
		resps, err = adm.AlterBrokerConfigs(ctx, ops)
	default:
		id, _ := strconv.ParseInt(e.name, 10, 32)
		resps, err = adm.AlterBrokerConfigs(ctx, ops, int32(id))
	}
	if err != nil {
		return res, fmt.Errorf("altering configs of %s: %w", e, err)
	}
	for _, r := range resps {
		if r.Err != nil {
			return res, fmt.Errorf("altering configs of %s: %s", e, kafkaErrorText(r.Err, r.ErrMessage))
		}
	}
	return res, nil
}

// isScramKey reports whether a users config key is a SCRAM mechanism.
func isScramKey(k string) bool {
	_, err := parseScramMechanism(k)
	return err == nil
}

// alterQuotaConfigs alters a user's or client's quotas and a user's SCRAM credentials.
func alterQuotaConfigs(ctx context.Context, adm *kadm.Client, e configEntity, items, dels []string) (ConfigsAlterResult, error) {
	res := ConfigsAlterResult{Entity: e.String(), Deleted: dels}
	var (
		ops     []kadm.AlterClientQuotaOp
		upserts []kadm.UpsertSCRAM
		deletes []kadm.DeleteSCRAM
	)
	scramAllowed := e.typ == entityUsers && e.client == nil && !e.isDefault
	for _, it := range items {
		k, v, err := parseKeyValue(it)
		if err != nil {
			return res, fmt.Errorf("--add-config %w", err)
		}
		if res.Set == nil {
			res.Set = map[string]string{}
		}
		if isScramKey(k) {
			if !scramAllowed {
				return res, fmt.Errorf("--add-config %s: SCRAM credentials belong to a named user alone", k)
			}
			cs, err := parseScramConfigs(it)
			if err != nil {
				return res, err
			}
			for _, c := range cs {
				salt, salted, err := saltPassword(c.mechanism, c.password, c.iterations)
				if err != nil {
					return res, err
				}
				upserts = append(upserts, kadm.UpsertSCRAM{User: e.name, Mechanism: c.mechanism, Iterations: c.iterations, Salt: salt, SaltedPassword: salted})
				res.Set[k] = fmt.Sprintf("iterations=%d", c.iterations) // never echo the password
			}
			continue
		}
		f, err := strconv.ParseFloat(v, 64)
		if err != nil {
			return res, fmt.Errorf("--add-config %s=%s: a quota is a number", k, v)
		}
		res.Set[k] = v
		ops = append(ops, kadm.AlterClientQuotaOp{Key: k, Value: f})
	}
	for _, k := range dels {
		if isScramKey(k) {
			if !scramAllowed {
				return res, fmt.Errorf("--delete-config %s: SCRAM credentials belong to a named user alone", k)
			}
			m, _ := parseScramMechanism(k)
			deletes = append(deletes, kadm.DeleteSCRAM{User: e.name, Mechanism: m})
			continue
		}
		ops = append(ops, kadm.AlterClientQuotaOp{Key: k, Remove: true})
	}
	if len(ops) > 0 {
		ent := e.quotaEntity()
		altered, err := adm.AlterClientQuotas(ctx, []kadm.AlterClientQuotaEntry{{Entity: ent, Ops: ops}})
		if err != nil {
			return res, fmt.Errorf("altering quotas of %s: %w", e, err)
		}
		for _, a := range altered {
			if a.Err != nil {
				return res, fmt.Errorf("altering quotas of %s: %s", e, kafkaErrorText(a.Err, a.ErrMessage))
			}
		}
	}
	// A user may be altered once per request: one request per credential.
	for _, d := range deletes {
		if err := checkScramAltered(adm.AlterUserSCRAMs(ctx, []kadm.DeleteSCRAM{d}, nil)); err != nil {
			return res, fmt.Errorf("deleting %s credential of %s: %w", d.Mechanism, e.name, err)
		}
	}
	for _, u := range upserts {
		if err := checkScramAltered(adm.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{u})); err != nil {
			return res, fmt.Errorf("setting %s credential of %s: %w", u.Mechanism, e.name, err)
		}
	}
	return res, nil
}

func checkScramAltered(altered kadm.AlteredUserSCRAMs, err error) error {
	if err != nil {
		return err
	}
	for _, a := range altered {
		if a.Err != nil {
			return errors.New(kafkaErrorText(a.Err, a.ErrMessage))
		}
	}
	return nil
}
