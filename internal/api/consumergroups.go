package api

import (
	"github.com/gregor-project/gregor/internal/group"
	"github.com/gregor-project/gregor/internal/metadata"
)

// imageTopics is the metadata image as the group coordinator's consumer groups (KIP-848)
// see it: topics by name and id. Two views are equal exactly when they are the same image.
type imageTopics struct{ im *metadata.Image }

func (v imageTopics) Topic(name string) (group.TopicID, int32, bool) {
	t := v.im.Topic(name)
	if t == nil {
		return group.TopicID{}, 0, false
	}
	return t.ID, t.Partitions, true
}

func (v imageTopics) TopicByID(id group.TopicID) (string, int32, bool) {
	t := v.im.TopicByID(metadata.TopicID(id))
	if t == nil {
		return "", 0, false
	}
	return t.Name, t.Partitions, true
}

func (v imageTopics) Names() []string { return v.im.TopicNames() }

// ConsumerTopics is the current topics view for the group coordinator (its Topics option).
func (h *Handler) ConsumerTopics() group.Topics { return imageTopics{h.Meta.Image()} }
