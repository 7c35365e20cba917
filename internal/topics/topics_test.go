package topics_test

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/sigdata/sig/internal/devenv"
	"github.com/sigdata/sig/internal/topics"
)

// Ensure creates the missing topics (with the partitions asked for, or the
// broker's default), leaves existing ones as they are, and names a topic it
// cannot create.
func TestEnsure(t *testing.T) {
	k := devenv.NewKafka(t, devenv.KafkaConfig{Topics: []string{"old"}, Partitions: 3})
	cl, err := k.Client()
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx := context.Background()
	specs := []topics.Spec{{Name: "old", Partitions: 1}, {Name: "new.default", Partitions: -1}, {Name: "new.two", Partitions: 2},
		{Name: "new.two", Partitions: 2}}
	created, err := topics.Ensure(ctx, cl, specs...)
	if err != nil || !slices.Equal(created, []string{"new.default", "new.two"}) {
		t.Fatalf("created %v, %v; want new.default and new.two", created, err)
	}
	// A client of its own: cl's cached metadata may predate the creation.
	cl2, err := k.Client()
	if err != nil {
		t.Fatal(err)
	}
	defer cl2.Close()
	td, err := kadm.NewClient(cl2).ListTopics(ctx, "old", "new.default", "new.two")
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]int{"old": 3, "new.default": 3, "new.two": 2} {
		if d := td[name]; d.Err != nil || len(d.Partitions) != want {
			t.Errorf("%s: %d partitions, %v; want %d", name, len(d.Partitions), d.Err, want)
		}
	}
	if created, err := topics.Ensure(ctx, cl, specs...); err != nil || len(created) != 0 {
		t.Errorf("second Ensure created %v, %v; want nothing", created, err)
	}
	// Kafka refuses a name that differs from an existing one only in '.'
	// versus '_' (their metric names would collide).
	created, err = topics.Ensure(ctx, cl, topics.Spec{Name: "fine"}, topics.Spec{Name: "new_two"})
	if err == nil || !strings.Contains(err.Error(), "create topic new_two: INVALID_TOPIC_EXCEPTION") || !slices.Equal(created, []string{"fine"}) {
		t.Errorf("colliding name: created %v, %v; want fine created and an error naming new_two", created, err)
	}
}
