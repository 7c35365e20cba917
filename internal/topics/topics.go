package topics

import (
	"context"
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Spec is a topic a process needs.
type Spec struct {
	Name string
	// Partitions is the partition count a topic created here gets; -1 (or
	// 0) takes the broker's default (num.partitions).
	Partitions int32
}

// Ensure creates the topics of specs that do not exist, with the broker's
// default replication factor, and returns the names of those it created. An
// error names every topic that is missing and could not be created, with
// the broker's reason.
func Ensure(ctx context.Context, cl *kgo.Client, specs ...Spec) (created []string, err error) {
	if len(specs) == 0 {
		return nil, nil
	}
	adm := kadm.NewClient(cl)
	names := make([]string, 0, len(specs))
	for _, s := range specs {
		names = append(names, s.Name)
	}
	listed, err := adm.ListTopics(ctx, names...)
	if err != nil {
		return nil, fmt.Errorf("topics: list %v: %w", names, err)
	}
	var errs []error
	seen := map[string]bool{}
	for _, s := range specs {
		if seen[s.Name] {
			continue
		}
		seen[s.Name] = true
		if d, ok := listed[s.Name]; ok && d.Err == nil {
			continue // exists
		} else if ok && !errors.Is(d.Err, kerr.UnknownTopicOrPartition) {
			errs = append(errs, fmt.Errorf("topic %s: %w", s.Name, d.Err))
			continue
		}
		parts := s.Partitions
		if parts <= 0 {
			parts = -1
		}
		resp, err := adm.CreateTopic(ctx, parts, -1, nil, s.Name)
		if err == nil {
			err = resp.Err
		}
		switch {
		case err == nil:
			created = append(created, s.Name)
		case errors.Is(err, kerr.TopicAlreadyExists):
			// Created meanwhile by someone else: what we wanted.
		default:
			errs = append(errs, fmt.Errorf("create topic %s: %w", s.Name, err))
		}
	}
	if len(errs) > 0 {
		return created, fmt.Errorf("topics: %w", errors.Join(errs...))
	}
	return created, nil
}
