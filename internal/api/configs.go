package api

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strconv"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregor-project/gregor/internal/config"
	"github.com/gregor-project/gregor/internal/metadata"
)

// Config changes shared by AlterConfigs (replace every override) and IncrementalAlterConfigs
// (set, delete, append, subtract). Both are decided by the controller (forward.go): topic
// resources, the cluster-wide broker default (name "") and single brokers (name = a broker
// id). This broker checks each resource first (known keys, valid values, dynamic broker keys
// only, a resource named once) against the overrides its image holds, and forwards the
// resources that pass. Applying a dynamic broker config to this broker is a reaction to the
// metadata image (ApplyImageConfigs), as are topic overrides (ReconfigureTopic).

// configKey names one config resource of a request.
type configKey struct {
	typ  kmsg.ConfigResourceType
	name string
}

// configAnswer is the controller's answer for one config resource.
type configAnswer struct {
	configKey
	code int16
	msg  *string
}

// checkConfigs computes the overrides resource typ/name would have after next, from the
// ones im holds, and checks them. It returns them: what the image should show once the
// controller has applied the change.
func (h *Handler) checkConfigs(im *metadata.Image, typ kmsg.ConfigResourceType, name string, next func(cur map[string]string) (map[string]string, error)) (map[string]string, error) {
	switch typ {
	case kmsg.ConfigResourceTypeTopic:
		var cur map[string]string
		if t := im.Topic(name); t != nil {
			cur = t.Configs
		}
		m, err := next(maps.Clone(cur))
		if err != nil {
			return nil, err
		}
		for k, v := range m {
			if err := config.ValidateTopicConfig(k, v); err != nil {
				return nil, err
			}
		}
		if _, err := h.settings(m); err != nil {
			return nil, err
		}
		return m, nil
	case kmsg.ConfigResourceTypeBroker:
		cur, err := brokerConfigs(im, name)
		if err != nil {
			return nil, err
		}
		m, err := next(maps.Clone(cur))
		if err != nil {
			return nil, err
		}
		for k, v := range m {
			if name == "" && config.PerBrokerOnly(k) {
				return nil, &config.Error{Key: k, Value: v, Reason: config.PerBrokerOnlyReason, Err: config.ErrInvalidConfig}
			}
			if err := h.Cfg.ValidateDynamic(k, v); err != nil {
				return nil, err
			}
		}
		if err := h.checkListenerStores(name, cur, m); err != nil {
			return nil, err
		}
		return m, nil
	case kmsg.ConfigResourceTypeGroupConfig:
		if name == "" {
			return nil, fmt.Errorf("%w: Default group resources are not allowed.", errInvalidRequest)
		}
		m, err := next(maps.Clone(im.GroupConfigs[name]))
		if err != nil {
			return nil, err
		}
		if err := h.Cfg.ValidateGroupConfigs(m); err != nil {
			return nil, err
		}
		return m, nil
	}
	return nil, fmt.Errorf("%w: config resource type %d is not supported", errInvalidRequest, typ)
}

// checkListenerStores checks a change of broker name's dynamic listener stores, from cur
// to next (its whole set of dynamic configs), before anything is stored: only the broker
// itself can load the stores and compare them with the ones it serves, so the change must
// be sent to it (Kafka's check of the resource name), and its listeners must take them.
func (h *Handler) checkListenerStores(name string, cur, next map[string]string) error {
	changed := "" // a changed store key, for errors
	for _, m := range []map[string]string{cur, next} {
		for k := range m {
			was, inCur := cur[k]
			is, inNext := next[k]
			if config.PerBrokerOnly(k) && (was != is || inCur != inNext) {
				changed = k
			}
		}
	}
	if changed == "" {
		return nil
	}
	if name != strconv.Itoa(int(h.NodeID)) {
		return fmt.Errorf("%w: Unexpected broker id, expected %d, but received %s (a broker's listener stores are changed through that broker, which checks them)", errInvalidRequest, h.NodeID, name)
	}
	if h.Listeners == nil {
		return &config.Error{Key: changed, Value: next[changed], Reason: "this broker cannot check listener stores", Err: config.ErrInvalidConfig}
	}
	cfg, err := h.Cfg.WithDynamic(next)
	if err != nil {
		return err
	}
	return h.Listeners.CheckListenerStores(cfg)
}

// brokerConfigs returns the dynamic overrides im holds for broker resource name: "" is the
// cluster-wide default, a broker id that broker's own overrides.
func brokerConfigs(im *metadata.Image, name string) (map[string]string, error) {
	if name == "" {
		return im.BrokerConfigs, nil
	}
	id, err := strconv.ParseInt(name, 10, 32)
	if err != nil || id < 0 {
		return nil, fmt.Errorf("%w: broker resource name %q is not a broker id", errInvalidRequest, name)
	}
	return im.NodeConfigs[int32(id)], nil
}

// configsShown reports whether im holds want as the overrides of resource k.
func configsShown(im *metadata.Image, k configKey, want map[string]string) bool {
	switch k.typ {
	case kmsg.ConfigResourceTypeTopic:
		t := im.Topic(k.name)
		return t != nil && maps.Equal(t.Configs, want)
	case kmsg.ConfigResourceTypeBroker:
		cur, err := brokerConfigs(im, k.name)
		return err == nil && maps.Equal(cur, want)
	case kmsg.ConfigResourceTypeGroupConfig:
		return maps.Equal(im.GroupConfigs[k.name], want)
	}
	return true
}

// checkConfigResources checks every resource of a request (keys[i] with next[i]): a
// resource named twice is INVALID_REQUEST for each entry, as in Kafka. It returns each
// resource's expected overrides and error.
//
// A resource the connection may not alter (ALTER_CONFIGS, configDenied) fails with its
// authorization error before it is validated, as Kafka authorizes first; a resource named
// twice is INVALID_REQUEST whoever asks.
func (h *Handler) checkConfigResources(c *Conn, keys []configKey, next []func(map[string]string) (map[string]string, error)) ([]map[string]string, []error) {
	im := h.Meta.Image()
	seen := map[configKey]int{}
	for _, k := range keys {
		seen[k]++
	}
	wants, errs := make([]map[string]string, len(keys)), make([]error, len(keys))
	for i, k := range keys {
		if seen[k] > 1 {
			errs[i] = fmt.Errorf("%w: resource %d/%q appears more than once", errInvalidRequest, k.typ, k.name)
			continue
		}
		if errs[i] = h.configDenied(c, kmsg.ACLOperationAlterConfigs, k.typ, k.name); errs[i] != nil {
			continue
		}
		wants[i], errs[i] = h.checkConfigs(im, k.typ, k.name, next[i])
	}
	return wants, errs
}

// forwardCheckedConfigs forwards, as fwd, the resources whose local check passed (errs[i] ==
// nil; add(i) appends resource i to fwd) and sets their errors from the controller's answer.
// AlterConfigs and IncrementalAlterConfigs share it; only their resource types differ.
func (h *Handler) forwardCheckedConfigs(ctx context.Context, fwd kmsg.Request, add func(i int), keys []configKey, wants []map[string]string, errs []error, validateOnly bool) {
	var idx []int
	var fwdKeys []configKey
	var fwdWants []map[string]string
	for i := range keys {
		if errs[i] == nil {
			add(i)
			idx, fwdKeys, fwdWants = append(idx, i), append(fwdKeys, keys[i]), append(fwdWants, wants[i])
		}
	}
	if len(idx) == 0 {
		return
	}
	for j, err := range h.forwardConfigs(ctx, fwd, fwdKeys, fwdWants, validateOnly) {
		errs[idx[j]] = err
	}
}

// forwardConfigs sends fwd (an AlterConfigs or IncrementalAlterConfigs request holding
// exactly the resources keys, in order) to the controller and returns its answer for each.
// Unless validateOnly, it then waits, at most configVisibleTimeout, until this broker's
// image holds wants[i] for every changed resource: a describe sent to this broker next sees
// the change. A change that does not show in time is answered as the controller answered.
func (h *Handler) forwardConfigs(ctx context.Context, fwd kmsg.Request, keys []configKey, wants []map[string]string, validateOnly bool) []error {
	errs := make([]error, len(keys))
	r, err := h.forward(ctx, fwd)
	if err != nil {
		for i := range errs {
			errs[i] = err
		}
		return errs
	}
	var answers []configAnswer
	switch r := r.(type) {
	case *kmsg.AlterConfigsResponse:
		for _, a := range r.Resources {
			answers = append(answers, configAnswer{configKey{a.ResourceType, a.ResourceName}, a.ErrorCode, a.ErrorMessage})
		}
	case *kmsg.IncrementalAlterConfigsResponse:
		for _, a := range r.Resources {
			answers = append(answers, configAnswer{configKey{a.ResourceType, a.ResourceName}, a.ErrorCode, a.ErrorMessage})
		}
	}
	byKey := map[configKey]configAnswer{}
	for _, a := range answers {
		byKey[a.configKey] = a
	}
	var changed []int
	for i, k := range keys {
		a, ok := byKey[k]
		if !ok {
			errs[i] = fmt.Errorf("api: the controller did not answer for resource %d/%q", k.typ, k.name)
			continue
		}
		if errs[i] = controllerError(a.code, a.msg); errs[i] == nil && !validateOnly {
			changed = append(changed, i)
		}
	}
	if len(changed) > 0 {
		err := h.awaitMetadata(ctx, func(im *metadata.Image) bool {
			for _, i := range changed {
				if !configsShown(im, keys[i], wants[i]) {
					return false
				}
			}
			return true
		}, configVisibleTimeout)
		if err != nil {
			h.Log.Warn("config change not shown in this broker's metadata in time", "err", err)
		}
	}
	return errs
}

// ApplyImageConfigs makes the dynamic broker configs of im this broker's: im.BrokerConfigs
// as the cluster-wide defaults (DYNAMIC_DEFAULT_BROKER_CONFIG) and im.NodeConfigs[h.NodeID]
// as this broker's own (DYNAMIC_BROKER_CONFIG, which wins). When that changes an effective
// value, every topic of im is re-resolved (ReconfigureTopic). The broker calls it for every
// image that changes either map (and once at start). A value this broker refuses (a
// cross-key rule broken) is skipped and reported in the error; the rest still apply.
func (h *Handler) ApplyImageConfigs(im *metadata.Image) error {
	own := im.NodeConfigs[h.NodeID]
	defaults, dynamic := h.Cfg.DynamicDefaults(), h.Cfg.Dynamic()
	if maps.Equal(defaults, im.BrokerConfigs) && maps.Equal(dynamic, own) {
		return nil // the common case: nothing changed (values as set are already normal)
	}
	errs := []error{ApplyDynamicDefaults(h.Cfg, im.BrokerConfigs), ApplyDynamic(h.Cfg, own)}
	if !maps.Equal(defaults, h.Cfg.DynamicDefaults()) || !maps.Equal(dynamic, h.Cfg.Dynamic()) {
		errs = append(errs, h.reconfigureAll(im))
	}
	return errors.Join(errs...)
}

// ApplyDynamic makes m this broker's whole set of per-broker dynamic configs: keys no
// longer in m are removed, the rest set. Every key is tried; the errors are joined.
func ApplyDynamic(cfg *config.Broker, m map[string]string) error {
	return applyLayer(cfg.Dynamic(), m, cfg.SetDynamic, cfg.DeleteDynamic)
}

// ApplyDynamicDefaults makes m the whole set of cluster-wide dynamic defaults, as
// ApplyDynamic does for the per-broker set.
func ApplyDynamicDefaults(cfg *config.Broker, m map[string]string) error {
	return applyLayer(cfg.DynamicDefaults(), m, cfg.SetDynamicDefault, cfg.DeleteDynamicDefault)
}

func applyLayer(cur, m map[string]string, set func(k, v string) error, del func(k string) error) error {
	var errs []error
	for k := range cur {
		if _, ok := m[k]; !ok {
			errs = append(errs, del(k))
		}
	}
	for k, v := range m {
		if cur[k] != v {
			errs = append(errs, set(k, v))
		}
	}
	return errors.Join(errs...)
}

// configDenied is the authorization error of op (DESCRIBE_CONFIGS or ALTER_CONFIGS) on a
// config resource for the connection, or nil when allowed: a topic's configs are the
// topic's (TOPIC_AUTHORIZATION_FAILED), a group's the group's (GROUP_AUTHORIZATION_FAILED),
// and a broker's, a broker logger's and client metrics' the cluster's
// (CLUSTER_AUTHORIZATION_FAILED). A type Kafka does not define is left to validation.
func (h *Handler) configDenied(c *Conn, op kmsg.ACLOperation, typ kmsg.ConfigResourceType, name string) error {
	switch typ {
	case kmsg.ConfigResourceTypeTopic:
		if !h.authorized(c, op, kmsg.ACLResourceTypeTopic, name) {
			return kerr.TopicAuthorizationFailed
		}
	case kmsg.ConfigResourceTypeGroupConfig:
		if !h.authorized(c, op, kmsg.ACLResourceTypeGroup, name) {
			return kerr.GroupAuthorizationFailed
		}
	case kmsg.ConfigResourceTypeBroker, kmsg.ConfigResourceTypeBrokerLogger, kmsg.ConfigResourceTypeClientMetrics:
		if !h.authorizedCluster(c, op) {
			return kerr.ClusterAuthorizationFailed
		}
	}
	return nil
}
