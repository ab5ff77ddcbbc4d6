package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// `gregor reassign ...`: move partition replicas between brokers with
// AlterPartitionReassignments (KIP-455), like kafka-reassign-partitions.sh:
// generate a balanced plan, execute it (optionally throttled, optionally
// waiting with progress), check its status, cancel it. The plan file format
// and its checks are in reassign_plan.go.

// Replication throttle configs, as Kafka's tool sets them: a rate on every
// broker taking part, and on each topic the replicas the rate applies to
// ("partition:broker,..."): the current replicas of moving partitions lead
// the copy, the new ones follow.
const (
	leaderThrottledRate      = "leader.replication.throttled.rate"
	followerThrottledRate    = "follower.replication.throttled.rate"
	leaderThrottledReplicas  = "leader.replication.throttled.replicas"
	followerThrottledRepicas = "follower.replication.throttled.replicas"
)

// metadataLagGrace is how long a partition may be no longer reassigning yet
// still show other replicas than the plan's (a broker's metadata trails the
// controller's) before the wait calls it failed.
const metadataLagGrace = 10 * time.Second

func newReassignCommand() *cobra.Command {
	var cf clientFlags
	cmd := &cobra.Command{
		Use:   "reassign",
		Short: "Generate, execute, check and cancel partition reassignments",
	}
	cf.register(cmd)
	cmd.AddCommand(newReassignGenerateCommand(&cf), newReassignExecuteCommand(&cf),
		newReassignStatusCommand(&cf), newReassignCancelCommand(&cf))
	return cmd
}

// readPlanFile reads and parses a --plan file.
func readPlanFile(path string) (ReassignmentPlan, error) {
	if path == "" {
		return ReassignmentPlan{}, errors.New("--plan is required")
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return ReassignmentPlan{}, err
	}
	plan, err := ParsePlan(data)
	if err != nil {
		return ReassignmentPlan{}, fmt.Errorf("%s: %w", path, err)
	}
	return plan, nil
}

// clusterAssignment fetches (uncached) the brokers and the assignment of
// topics. Topics the cluster does not know are absent from the assignment.
func clusterAssignment(ctx context.Context, cl *kgo.Client, topics []string) (Assignment, []int32, error) {
	meta, err := requestMetadata(ctx, cl, topics)
	if err != nil {
		return nil, nil, fmt.Errorf("metadata: %w", err)
	}
	a := Assignment{}
	for _, t := range meta.Topics {
		if t.Topic == nil || t.ErrorCode != 0 {
			continue
		}
		a[*t.Topic] = map[int32][]int32{}
		for _, p := range t.Partitions {
			a.Set(*t.Topic, p.Partition, p.Replicas)
		}
	}
	var brokers []int32
	for _, b := range meta.Brokers {
		brokers = append(brokers, b.NodeID)
	}
	slices.Sort(brokers)
	return a, brokers, nil
}

// ---- generate ----

// GeneratedPlan is the output of `reassign generate`.
type GeneratedPlan struct {
	Current  ReassignmentPlan `json:"current"`
	Proposed ReassignmentPlan `json:"proposed"`
	Moves    int              `json:"replicas_moved"` // replicas the proposal places on a new broker
}

// GenerateReassignment reads the current assignment of topics and proposes
// a balanced one over brokers (GenerateAssignment) with rf replicas per
// partition (<= 0: keep each partition's count).
func GenerateReassignment(ctx context.Context, cl *kgo.Client, topics []string, brokers []int32, rf int) (GeneratedPlan, error) {
	current, live, err := clusterAssignment(ctx, cl, topics)
	if err != nil {
		return GeneratedPlan{}, err
	}
	for _, t := range topics {
		if _, ok := current[t]; !ok {
			return GeneratedPlan{}, fmt.Errorf("topic %s: %s", t, kafkaErrorText(kerr.UnknownTopicOrPartition, ""))
		}
	}
	for _, b := range brokers {
		if !slices.Contains(live, b) {
			return GeneratedPlan{}, fmt.Errorf("broker %d is not in the cluster (brokers: %s)", b, joinInt32s(live))
		}
	}
	proposed, err := GenerateAssignment(current, brokers, rf)
	if err != nil {
		return GeneratedPlan{}, err
	}
	return GeneratedPlan{Current: current.Plan(), Proposed: proposed.Plan(), Moves: movedReplicas(current, proposed)}, nil
}

func newReassignGenerateCommand(cf *clientFlags) *cobra.Command {
	var (
		topics, brokers string
		rf              int
	)
	cmd := &cobra.Command{
		Use:   "generate --topics T1,T2 --brokers 1,2,3 [--rf N]",
		Short: "Print the current assignment and a balanced one over the given brokers",
		Long: `Print the topics' current replica assignment (save it to roll back) and a
proposed assignment that spreads replicas and leaders evenly over --brokers,
keeping replicas where they are when balance allows. Nothing is changed: pass
the proposal to 'reassign execute --plan'.`,
		Args:         cobra.NoArgs,
		SilenceUsage: true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var ts []string
			for _, t := range strings.Split(topics, ",") {
				if t = strings.TrimSpace(t); t != "" && !slices.Contains(ts, t) {
					ts = append(ts, t)
				}
			}
			if len(ts) == 0 {
				return errors.New("--topics: no topic given")
			}
			bs, err := parseBrokerIDs(brokers)
			if err != nil {
				return fmt.Errorf("--brokers: %w", err)
			}
			if rf < 0 || rf > len(bs) {
				return fmt.Errorf("--rf %d: want 1 to %d (the number of --brokers), or 0 to keep each partition's", rf, len(bs))
			}
			return clientRun(cmd, cf, adminTimeout, func(ctx context.Context, cl *kgo.Client, format string) error {
				g, err := GenerateReassignment(ctx, cl, ts, bs, rf)
				if err != nil {
					return err
				}
				return printGeneratedPlan(cmd.OutOrStdout(), format, g)
			})
		},
	}
	f := cmd.Flags()
	f.StringVar(&topics, "topics", "", "comma-separated topics to reassign (required)")
	f.StringVar(&brokers, "brokers", "", "comma-separated broker ids to place replicas on (required)")
	f.IntVar(&rf, "rf", 0, "replicas per partition (default: keep each partition's)")
	mustMarkRequired(cmd, "topics")
	mustMarkRequired(cmd, "brokers")
	return cmd
}

func printGeneratedPlan(w io.Writer, format string, g GeneratedPlan) error {
	if format == outputJSON {
		return writeJSON(w, g)
	}
	_, err := fmt.Fprintf(w, "Current partition replica assignment\n%s\n\nProposed partition reassignment configuration (%d replica(s) move)\n%s\n",
		g.Current.MarshalCompact(), g.Moves, g.Proposed.MarshalCompact())
	return err
}

// ---- execute ----

// ExecuteOptions tune ExecuteReassignment.
type ExecuteOptions struct {
	// Throttle, if > 0, limits replication of the moving partitions to this
	// many bytes per second per broker until the reassignment is done.
	Throttle int64
	// Wait polls until no partition of the plan is moving, reporting
	// progress, then removes the throttle.
	Wait bool
	// Additional starts the plan even while other reassignments are in
	// progress (Kafka's --additional).
	Additional bool
	// Interval between polls while waiting (default 1s).
	Interval time.Duration
	// TTY draws one redrawn progress bar instead of a line per change.
	TTY bool
}

// ExecuteReassignment checks plan against the cluster (nothing is sent if
// it does not match), prints the current assignment for rollback, sets the
// throttle, starts the reassignment and, with Wait, follows it to the end
// and removes the throttle. It returns an error if any partition failed to
// start or, waiting, did not end with the plan's replicas; per-partition
// errors are written to w as they are known.
func ExecuteReassignment(ctx context.Context, cl *kgo.Client, plan ReassignmentPlan, opt ExecuteOptions, w io.Writer) error {
	current, brokers, err := clusterAssignment(ctx, cl, plan.Topics())
	if err != nil {
		return err
	}
	if err := CheckPlan(plan, current, brokers); err != nil {
		return err
	}
	adm := kadm.NewClient(cl)
	if !opt.Additional {
		ongoing, err := listReassignments(ctx, cl, nil)
		if err != nil {
			return err
		}
		if len(ongoing) > 0 {
			return fmt.Errorf("%d partition(s) are being reassigned already (first: %s-%d): wait, cancel them, or give --additional",
				len(ongoing), ongoing[0].Topic, ongoing[0].Partition)
		}
	}
	rollback := Assignment{}
	for _, e := range plan.Partitions {
		r, _ := current.Lookup(e.Topic, e.Partition)
		rollback.Set(e.Topic, e.Partition, r)
	}
	fmt.Fprintf(w, "Current partition replica assignment\n%s\n\nSave this to use as the --plan of a rollback.\n\n", rollback.Plan().MarshalCompact())

	th := planThrottle(plan, current)
	if opt.Throttle > 0 && !th.empty() {
		if err := setThrottle(ctx, adm, th, opt.Throttle); err != nil {
			return err
		}
		fmt.Fprintf(w, "Throttle set to %d B/s on broker(s) %s.\n", opt.Throttle, joinInt32s(th.brokers))
	}

	req := kadm.AlterPartitionAssignmentsReq{}
	for _, e := range plan.Partitions {
		req.Assign(e.Topic, e.Partition, e.Replicas)
	}
	resps, err := adm.AlterPartitionAssignments(ctx, req)
	if err != nil {
		err = fmt.Errorf("starting the reassignment: %w", err)
		if opt.Throttle > 0 && !th.empty() {
			if cerr := clearThrottle(ctx, adm, th.brokers, plan.Topics()); cerr != nil {
				err = errors.Join(err, cerr)
			}
		}
		return err
	}
	var started []PlanPartition
	failed := 0
	for _, e := range plan.Partitions {
		r, ok := resps[e.Topic][e.Partition]
		switch {
		case !ok:
			failed++
			fmt.Fprintf(w, "Error reassigning %s: the response did not include it\n", e.name())
		case r.Err != nil:
			failed++
			fmt.Fprintf(w, "Error reassigning %s: %s\n", e.name(), kafkaErrorText(r.Err, r.ErrMessage))
		default:
			started = append(started, e)
		}
	}
	if len(started) > 0 {
		names := make([]string, len(started))
		for i, e := range started {
			names[i] = e.name()
		}
		fmt.Fprintf(w, "Successfully started partition reassignment(s) for %s\n", strings.Join(names, ","))
	}
	if opt.Wait && len(started) > 0 {
		n, err := waitReassignment(ctx, cl, started, opt, w)
		if err != nil {
			return fmt.Errorf("waiting for the reassignment: %w", err)
		}
		failed += n
	}
	if opt.Throttle > 0 && !th.empty() {
		if opt.Wait {
			if err := clearThrottle(ctx, adm, th.brokers, plan.Topics()); err != nil {
				return err
			}
			fmt.Fprintln(w, "Throttle removed.")
		} else {
			fmt.Fprintln(w, "The throttle stays until 'gregor reassign status --plan FILE' finds the reassignment complete.")
		}
	}
	if failed > 0 {
		return fmt.Errorf("%d partition reassignment(s) failed", failed)
	}
	return nil
}

// maxPollErrors is how many progress checks in a row may fail before the
// wait gives up.
const maxPollErrors = 5

// waitReassignment polls until no partition of started is moving and
// returns how many ended without the plan's replicas.
func waitReassignment(ctx context.Context, cl *kgo.Client, started []PlanPartition, opt ExecuteOptions, w io.Writer) (int, error) {
	errorsInRow := 0
	interval := opt.Interval
	if interval <= 0 {
		interval = time.Second
	}
	last := map[string]string{}
	mismatchSince := map[string]time.Time{}
	done, failed := map[string]bool{}, 0
	target := Assignment{}
	for _, e := range started {
		target.Set(e.Topic, e.Partition, e.Replicas)
	}
	for {
		progress, err := reassignmentProgress(ctx, cl, target)
		if err != nil && ctx.Err() == nil {
			// A controller or leader change can fail one poll; a broker
			// that cannot answer at all fails every one.
			if errorsInRow++; errorsInRow >= maxPollErrors {
				return failed, err
			}
			fmt.Fprintf(w, "checking progress: %v\n", err)
		} else {
			errorsInRow = 0
		}
		for _, p := range progress {
			key := fmt.Sprintf("%s-%d", p.Topic, p.Partition)
			if done[key] {
				continue
			}
			switch p.State {
			case stateComplete:
				done[key] = true
			case stateDiffers:
				if mismatchSince[key].IsZero() {
					mismatchSince[key] = time.Now()
				}
				if time.Since(mismatchSince[key]) > metadataLagGrace {
					done[key] = true
					failed++
					p.State = stateFailed
				}
			default:
				delete(mismatchSince, key)
			}
			line := progressLine(p)
			if !opt.TTY && line != last[key] && (p.State != stateDiffers) {
				fmt.Fprintln(w, line)
			}
			last[key] = line
		}
		if opt.TTY {
			fmt.Fprintf(w, "\r%s", progressBar(len(done), len(started), 30))
		}
		if len(done) == len(started) {
			if opt.TTY {
				fmt.Fprintln(w)
				for _, e := range started {
					if l := last[e.name()]; strings.Contains(l, stateFailed) {
						fmt.Fprintln(w, l)
					}
				}
			}
			return failed, nil
		}
		select {
		case <-ctx.Done():
			if opt.TTY {
				fmt.Fprintln(w)
			}
			return failed, ctx.Err()
		case <-time.After(interval):
		}
	}
}

// progressBar renders "[#####-----] done/total partitions reassigned".
func progressBar(done, total, width int) string {
	filled := 0
	if total > 0 {
		filled = done * width / total
	}
	return fmt.Sprintf("[%s%s] %d/%d partitions reassigned", strings.Repeat("#", filled), strings.Repeat("-", width-filled), done, total)
}

// progressLine is one partition's state as a line of text.
func progressLine(p ReassignmentProgress) string {
	switch p.State {
	case stateComplete:
		return fmt.Sprintf("%s-%d: complete, replicas %s", p.Topic, p.Partition, joinInt32s(p.Replicas))
	case stateInProgress:
		return fmt.Sprintf("%s-%d: in progress, replicas %s, adding %s, removing %s", p.Topic, p.Partition,
			joinInt32s(p.Replicas), orDash(joinInt32s(p.Adding)), orDash(joinInt32s(p.Removing)))
	default:
		return fmt.Sprintf("%s-%d: %s: replicas %s, plan %s", p.Topic, p.Partition, p.State, joinInt32s(p.Replicas), joinInt32s(p.Target))
	}
}

func newReassignExecuteCommand(cf *clientFlags) *cobra.Command {
	var (
		planFile string
		opt      ExecuteOptions
	)
	cmd := &cobra.Command{
		Use:   "execute --plan FILE [--throttle BYTES_PER_SEC] [--wait]",
		Short: "Start the reassignment a plan file describes",
		Long: `Check the plan against the cluster (nothing is sent if a topic, partition or
broker is unknown), print the current assignment for a rollback, and start the
reassignment. --throttle limits the replication traffic of the moving
partitions; --wait follows the reassignment until no partition of the plan is
moving (a progress bar on a terminal, a line per change otherwise) and then
removes the throttle. Without --wait, 'reassign status --plan' removes it once
the reassignment is complete.`,
		Args:         cobra.NoArgs,
		SilenceUsage: true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if opt.Throttle < 0 {
				return fmt.Errorf("--throttle %d: want bytes per second > 0", opt.Throttle)
			}
			plan, err := readPlanFile(planFile)
			if err != nil {
				return err
			}
			timeout := adminTimeout
			if opt.Wait {
				timeout = 0
			}
			return clientRun(cmd, cf, timeout, func(ctx context.Context, cl *kgo.Client, format string) error {
				if format == outputJSON {
					// It reports as it goes; use 'reassign status -o json' for a result.
					return errors.New("reassign execute prints text only: drop -o json")
				}
				opt.TTY = isTerminal(cmd.OutOrStdout())
				return ExecuteReassignment(ctx, cl, plan, opt, cmd.OutOrStdout())
			})
		},
	}
	f := cmd.Flags()
	f.StringVar(&planFile, "plan", "", "reassignment plan JSON file (required)")
	f.Int64Var(&opt.Throttle, "throttle", 0, "replication throttle in bytes/second for the moving partitions (0: none)")
	f.BoolVar(&opt.Wait, "wait", false, "wait until the reassignment is done, showing progress, then remove the throttle")
	f.BoolVar(&opt.Additional, "additional", false, "start even while other reassignments are in progress")
	f.DurationVar(&opt.Interval, "interval", time.Second, "how often --wait checks progress")
	mustMarkRequired(cmd, "plan")
	return cmd
}

// isTerminal reports whether w is a character device (a terminal).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// ---- throttle ----

// throttle is what a plan's throttle touches.
type throttle struct {
	brokers []int32           // every broker holding or receiving a moving replica
	leaders map[string]string // topic -> "p:b,..." current replicas of its moving partitions
	follows map[string]string // topic -> "p:b,..." replicas being added
}

func (t throttle) empty() bool { return len(t.brokers) == 0 }

// planThrottle computes Kafka's throttle lists for the partitions of plan
// whose replicas change.
func planThrottle(plan ReassignmentPlan, current Assignment) throttle {
	th := throttle{leaders: map[string]string{}, follows: map[string]string{}}
	leaders, follows := map[string][]string{}, map[string][]string{}
	for _, e := range plan.Partitions {
		cur, _ := current.Lookup(e.Topic, e.Partition)
		if slices.Equal(cur, e.Replicas) {
			continue
		}
		for _, b := range cur {
			leaders[e.Topic] = append(leaders[e.Topic], fmt.Sprintf("%d:%d", e.Partition, b))
			if !slices.Contains(th.brokers, b) {
				th.brokers = append(th.brokers, b)
			}
		}
		for _, b := range e.Replicas {
			if slices.Contains(cur, b) {
				continue
			}
			follows[e.Topic] = append(follows[e.Topic], fmt.Sprintf("%d:%d", e.Partition, b))
			if !slices.Contains(th.brokers, b) {
				th.brokers = append(th.brokers, b)
			}
		}
	}
	slices.Sort(th.brokers)
	for t, l := range leaders {
		th.leaders[t] = strings.Join(l, ",")
	}
	for t, l := range follows {
		th.follows[t] = strings.Join(l, ",")
	}
	return th
}

// setThrottle sets the rate on th's brokers and the throttled replica lists
// on its topics (IncrementalAlterConfigs).
func setThrottle(ctx context.Context, adm *kadm.Client, th throttle, rate int64) error {
	r := strconv.FormatInt(rate, 10)
	resps, err := adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{
		{Op: kadm.SetConfig, Name: leaderThrottledRate, Value: &r},
		{Op: kadm.SetConfig, Name: followerThrottledRate, Value: &r},
	}, th.brokers...)
	if err := alterConfigsError("setting the throttle rate on broker", resps, err); err != nil {
		return err
	}
	for _, t := range sortedKeys(unionKeys(th.leaders, th.follows)) {
		var ops []kadm.AlterConfig
		if v, ok := th.leaders[t]; ok {
			ops = append(ops, kadm.AlterConfig{Op: kadm.SetConfig, Name: leaderThrottledReplicas, Value: kadm.StringPtr(v)})
		}
		if v, ok := th.follows[t]; ok {
			ops = append(ops, kadm.AlterConfig{Op: kadm.SetConfig, Name: followerThrottledRepicas, Value: kadm.StringPtr(v)})
		}
		resps, err := adm.AlterTopicConfigs(ctx, ops, t)
		if err := alterConfigsError("setting throttled replicas on topic", resps, err); err != nil {
			return err
		}
	}
	return nil
}

// clearThrottle deletes the throttle configs from brokers and topics.
func clearThrottle(ctx context.Context, adm *kadm.Client, brokers []int32, topics []string) error {
	if len(brokers) > 0 {
		resps, err := adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{
			{Op: kadm.DeleteConfig, Name: leaderThrottledRate},
			{Op: kadm.DeleteConfig, Name: followerThrottledRate},
		}, brokers...)
		if err := alterConfigsError("removing the throttle rate from broker", resps, err); err != nil {
			return err
		}
	}
	if len(topics) > 0 {
		resps, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{
			{Op: kadm.DeleteConfig, Name: leaderThrottledReplicas},
			{Op: kadm.DeleteConfig, Name: followerThrottledRepicas},
		}, topics...)
		if err := alterConfigsError("removing throttled replicas from topic", resps, err); err != nil {
			return err
		}
	}
	return nil
}

func alterConfigsError(what string, resps kadm.AlterConfigsResponses, err error) error {
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	for _, r := range resps {
		if r.Err != nil {
			return fmt.Errorf("%s %s: %s", what, r.Name, kafkaErrorText(r.Err, r.ErrMessage))
		}
	}
	return nil
}

func unionKeys(a, b map[string]string) map[string]bool {
	out := map[string]bool{}
	for k := range a {
		out[k] = true
	}
	for k := range b {
		out[k] = true
	}
	return out
}

// ---- status ----

// States of a plan entry in ReassignmentProgress.
const (
	stateComplete   = "complete"    // not moving, replicas equal the plan's
	stateInProgress = "in-progress" // listed by ListPartitionReassignments
	stateDiffers    = "not-moving"  // not moving, replicas differ from the plan's
	stateFailed     = "failed"      // stayed not-moving past metadataLagGrace while waiting
)

// ReassignmentProgress is one partition of `reassign status`: its current
// replicas and, while it moves, the replicas being added and removed. With a
// plan, Target and State say how it compares.
type ReassignmentProgress struct {
	Topic     string  `json:"topic"`
	Partition int32   `json:"partition"`
	Replicas  []int32 `json:"replicas"`
	Adding    []int32 `json:"adding_replicas"`
	Removing  []int32 `json:"removing_replicas"`
	Target    []int32 `json:"target_replicas,omitempty"`
	State     string  `json:"state,omitempty"`
}

// listReassignments lists ongoing reassignments of the partitions of only
// (nil: every partition), sorted by topic and partition.
func listReassignments(ctx context.Context, cl *kgo.Client, only Assignment) ([]ReassignmentProgress, error) {
	req := kmsg.NewPtrListPartitionReassignmentsRequest()
	req.TimeoutMillis = int32(adminTimeout / time.Millisecond)
	if only != nil {
		req.Topics = []kmsg.ListPartitionReassignmentsRequestTopic{}
		for _, t := range sortedKeys(only) {
			rt := kmsg.NewListPartitionReassignmentsRequestTopic()
			rt.Topic = t
			for p := range only[t] {
				rt.Partitions = append(rt.Partitions, p)
			}
			slices.Sort(rt.Partitions)
			req.Topics = append(req.Topics, rt)
		}
	}
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return nil, fmt.Errorf("listing reassignments: %w", err)
	}
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		return nil, fmt.Errorf("listing reassignments: %s", kafkaErrorText(err, derefString(resp.ErrorMessage)))
	}
	out := []ReassignmentProgress{}
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			out = append(out, ReassignmentProgress{Topic: t.Topic, Partition: p.Partition,
				Replicas: nonNil(p.Replicas), Adding: nonNil(p.AddingReplicas), Removing: nonNil(p.RemovingReplicas), State: stateInProgress})
		}
	}
	sortProgress(out)
	return out, nil
}

// reassignmentProgress compares the partitions of target with the cluster:
// in progress while listed as reassigning, else complete when the replicas
// (in order) equal the target's.
func reassignmentProgress(ctx context.Context, cl *kgo.Client, target Assignment) ([]ReassignmentProgress, error) {
	ongoing, err := listReassignments(ctx, cl, target)
	if err != nil {
		return nil, err
	}
	moving := map[string]ReassignmentProgress{}
	for _, o := range ongoing {
		moving[fmt.Sprintf("%s-%d", o.Topic, o.Partition)] = o
	}
	current, _, err := clusterAssignment(ctx, cl, sortedKeys(target))
	if err != nil {
		return nil, err
	}
	var out []ReassignmentProgress
	for _, e := range target.Plan().Partitions {
		p, ok := moving[e.name()]
		if !ok {
			cur, _ := current.Lookup(e.Topic, e.Partition)
			p = ReassignmentProgress{Topic: e.Topic, Partition: e.Partition, Replicas: nonNil(cur),
				Adding: []int32{}, Removing: []int32{}, State: stateDiffers}
			if slices.Equal(cur, e.Replicas) {
				p.State = stateComplete
			}
		}
		p.Target = e.Replicas
		out = append(out, p)
	}
	return out, nil
}

// ReassignmentStatus lists the ongoing reassignments (plan nil) or the state
// of every partition of plan (complete, in-progress or not-moving).
func ReassignmentStatus(ctx context.Context, cl *kgo.Client, plan *ReassignmentPlan) ([]ReassignmentProgress, error) {
	if plan == nil {
		return listReassignments(ctx, cl, nil)
	}
	current, brokers, err := clusterAssignment(ctx, cl, plan.Topics())
	if err != nil {
		return nil, err
	}
	if err := CheckPlan(*plan, current, brokers); err != nil {
		return nil, err
	}
	return reassignmentProgress(ctx, cl, plan.Assignment())
}

func sortProgress(ps []ReassignmentProgress) {
	sort.Slice(ps, func(i, j int) bool {
		if ps[i].Topic != ps[j].Topic {
			return ps[i].Topic < ps[j].Topic
		}
		return ps[i].Partition < ps[j].Partition
	})
}

// PrintReassignmentStatus writes ps as a table or JSON; withPlan adds the
// target and state columns.
func PrintReassignmentStatus(w io.Writer, format string, ps []ReassignmentProgress, withPlan bool) error {
	if format == outputJSON {
		return writeJSON(w, ps)
	}
	if len(ps) == 0 {
		_, err := fmt.Fprintln(w, "No partition reassignments in progress.")
		return err
	}
	header := []string{"TOPIC", "PARTITION", "REPLICAS", "ADDING", "REMOVING"}
	if withPlan {
		header = append(header, "TARGET", "STATE")
	}
	t := newTable(w, header...)
	for _, p := range ps {
		row := []string{p.Topic, strconv.Itoa(int(p.Partition)), joinInt32s(p.Replicas),
			orDash(joinInt32s(p.Adding)), orDash(joinInt32s(p.Removing))}
		if withPlan {
			row = append(row, joinInt32s(p.Target), p.State)
		}
		t.row(row...)
	}
	return t.flush()
}

func newReassignStatusCommand(cf *clientFlags) *cobra.Command {
	var (
		planFile          string
		preserveThrottles bool
	)
	cmd := &cobra.Command{
		Use:   "status [--plan FILE]",
		Short: "Show ongoing reassignments, or how far a plan has got",
		Long: `Without --plan, list every partition being reassigned with the replicas being
added and removed. With --plan, show each plan entry's state: in-progress,
complete (the replicas equal the plan's), or not-moving (not being reassigned,
yet the replicas differ from the plan's: it was never started, was cancelled or
failed; the command then exits non-zero). When every entry is complete, the
replication throttle is removed unless --preserve-throttles is given.`,
		Args:         cobra.NoArgs,
		SilenceUsage: true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var plan *ReassignmentPlan
			if planFile != "" {
				p, err := readPlanFile(planFile)
				if err != nil {
					return err
				}
				plan = &p
			}
			return clientRun(cmd, cf, adminTimeout, func(ctx context.Context, cl *kgo.Client, format string) error {
				ps, err := ReassignmentStatus(ctx, cl, plan)
				if err != nil {
					return err
				}
				if err := PrintReassignmentStatus(cmd.OutOrStdout(), format, ps, plan != nil); err != nil {
					return err
				}
				if plan == nil {
					return nil
				}
				complete, differs := 0, 0
				for _, p := range ps {
					switch p.State {
					case stateComplete:
						complete++
					case stateDiffers:
						differs++
					}
				}
				if complete == len(ps) && !preserveThrottles {
					if err := clearPlanThrottle(ctx, cl, *plan); err != nil {
						return err
					}
					if format != outputJSON {
						fmt.Fprintln(cmd.OutOrStdout(), "Reassignment complete; throttle removed.")
					}
				}
				if differs > 0 {
					return fmt.Errorf("%d partition(s) of the plan are not moving and do not have the plan's replicas", differs)
				}
				return nil
			})
		},
	}
	cmd.Flags().StringVar(&planFile, "plan", "", "reassignment plan JSON file (default: list every ongoing reassignment)")
	cmd.Flags().BoolVar(&preserveThrottles, "preserve-throttles", false, "keep the throttle configs even when the plan is complete")
	return cmd
}

// clearPlanThrottle removes the throttle from every broker of the cluster
// (a past execute may have throttled brokers that no longer hold the
// partitions) and from the plan's topics.
func clearPlanThrottle(ctx context.Context, cl *kgo.Client, plan ReassignmentPlan) error {
	_, brokers, err := clusterAssignment(ctx, cl, []string{})
	if err != nil {
		return err
	}
	return clearThrottle(ctx, kadm.NewClient(cl), brokers, plan.Topics())
}

// ---- cancel ----

// CancelResult is one partition of `reassign cancel`.
type CancelResult struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	Result    string `json:"result"` // cancelled, not-reassigning or failed
	Error     string `json:"error,omitempty"`
}

// CancelReassignment cancels the reassignment of every partition of plan
// (AlterPartitionReassignments with null replicas): a moving partition
// goes back to its replicas from before the reassignment. A partition not
// being reassigned (NO_REASSIGNMENT_IN_PROGRESS) is reported, not failed.
func CancelReassignment(ctx context.Context, cl *kgo.Client, plan ReassignmentPlan) ([]CancelResult, error) {
	req := kadm.AlterPartitionAssignmentsReq{}
	for _, e := range plan.Partitions {
		req.CancelAssign(e.Topic, e.Partition)
	}
	resps, err := kadm.NewClient(cl).AlterPartitionAssignments(ctx, req)
	if err != nil {
		return nil, fmt.Errorf("cancelling the reassignment: %w", err)
	}
	var out []CancelResult
	for _, e := range plan.Partitions {
		c := CancelResult{Topic: e.Topic, Partition: e.Partition, Result: "cancelled"}
		r, ok := resps[e.Topic][e.Partition]
		switch {
		case !ok:
			c.Result, c.Error = "failed", "the response did not include it"
		case errors.Is(r.Err, kerr.NoReassignmentInProgress):
			c.Result = "not-reassigning"
		case r.Err != nil:
			c.Result, c.Error = "failed", kafkaErrorText(r.Err, r.ErrMessage)
		}
		out = append(out, c)
	}
	return out, nil
}

func newReassignCancelCommand(cf *clientFlags) *cobra.Command {
	var (
		planFile          string
		preserveThrottles bool
	)
	cmd := &cobra.Command{
		Use:          "cancel --plan FILE",
		Short:        "Cancel the reassignment of a plan's partitions (they keep their old replicas)",
		Args:         cobra.NoArgs,
		SilenceUsage: true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			plan, err := readPlanFile(planFile)
			if err != nil {
				return err
			}
			return clientRun(cmd, cf, adminTimeout, func(ctx context.Context, cl *kgo.Client, format string) error {
				rs, err := CancelReassignment(ctx, cl, plan)
				if err != nil {
					return err
				}
				w := cmd.OutOrStdout()
				if format == outputJSON {
					err = writeJSON(w, rs)
				} else {
					t := newTable(w, "TOPIC", "PARTITION", "RESULT", "ERROR")
					for _, r := range rs {
						t.row(r.Topic, strconv.Itoa(int(r.Partition)), r.Result, r.Error)
					}
					err = t.flush()
				}
				if err != nil {
					return err
				}
				if !preserveThrottles {
					if err := clearPlanThrottle(ctx, cl, plan); err != nil {
						return err
					}
				}
				failed := 0
				for _, r := range rs {
					if r.Result == "failed" {
						failed++
					}
				}
				if failed > 0 {
					return fmt.Errorf("cancelling failed for %d partition(s)", failed)
				}
				return nil
			})
		},
	}
	cmd.Flags().StringVar(&planFile, "plan", "", "reassignment plan JSON file (required)")
	cmd.Flags().BoolVar(&preserveThrottles, "preserve-throttles", false, "keep the throttle configs")
	mustMarkRequired(cmd, "plan")
	return cmd
}
