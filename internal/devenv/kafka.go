package devenv

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

// KafkaConfig configures StartKafka.
type KafkaConfig struct {
	// DataDir, if set, makes the cluster persist its log, groups and
	// committed offsets there (kfake.DataDir); Restart reloads them.
	DataDir string
	// Topics are created at start with Partitions partitions each.
	Topics []string
	// Partitions is the partition count of Topics and the broker's default
	// for topics created without a count. Default 1.
	Partitions int32
	// Port, if set, is the broker's port (sigd's development mode keeps one
	// address across restarts). Default: a free port.
	Port int
}

// Kafka is an embedded single-broker Kafka cluster (kfake) on 127.0.0.1.
type Kafka struct {
	// Brokers are the seed addresses ("127.0.0.1:port").
	Brokers []string

	cfg     KafkaConfig
	cluster *kfake.Cluster
}

// StartKafka starts a kfake cluster.
func StartKafka(cfg KafkaConfig) (*Kafka, error) {
	if cfg.Partitions <= 0 {
		cfg.Partitions = 1
	}
	k := &Kafka{cfg: cfg}
	if err := k.start(cfg.Port); err != nil {
		return nil, err
	}
	if len(cfg.Topics) > 0 {
		for _, t := range cfg.Topics {
			if err := k.CreateTopic(context.Background(), t, cfg.Partitions); err != nil {
				k.Close()
				return nil, err
			}
		}
	}
	return k, nil
}

func (k *Kafka) start(port int) error {
	opts := []kfake.Opt{
		kfake.Ports(port),
		kfake.DefaultNumPartitions(int(k.cfg.Partitions)),
		// No kfake.AllowAutoTopicCreation: kfake persists a topic it
		// auto-created only with the next explicit change of topics, so a
		// killed process forgets it and every record in it. Topics come
		// from KafkaConfig.Topics, CreateTopic, or the SIG process that
		// uses them (internal/topics), as against a production cluster
		// that does not auto-create.
		// Static members (kgo.InstanceID) rejoin at once after a crash;
		// dynamic ones wait for this timeout before their partitions move.
		kfake.GroupMinSessionTimeout(time.Second),
	}
	if k.cfg.DataDir != "" {
		opts = append(opts, kfake.DataDir(k.cfg.DataDir))
	}
	c, err := kfake.NewCluster(opts...)
	if err != nil {
		return fmt.Errorf("devenv: start kfake: %w", err)
	}
	k.cluster = c
	k.Brokers = c.ListenAddrs()
	return nil
}

// Cluster returns the underlying kfake cluster (for fault injection).
func (k *Kafka) Cluster() *kfake.Cluster { return k.cluster }

// Close stops the cluster. With a DataDir its state is flushed there.
func (k *Kafka) Close() {
	if k.cluster != nil {
		k.cluster.Close()
		k.cluster = nil
	}
}

// Restart closes the cluster and starts it again on the same port, reloading
// its state from DataDir (without one, the restarted cluster is empty).
func (k *Kafka) Restart() error {
	if len(k.Brokers) == 0 {
		return errors.New("devenv: kafka never started")
	}
	var port int
	if _, err := fmt.Sscanf(k.Brokers[0], "127.0.0.1:%d", &port); err != nil {
		return fmt.Errorf("devenv: broker address %q: %w", k.Brokers[0], err)
	}
	k.Close()
	return k.start(port)
}

// Client returns a new kgo client for the cluster with opts appended; the
// caller closes it.
func (k *Kafka) Client(opts ...kgo.Opt) (*kgo.Client, error) {
	return kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(k.Brokers...)}, opts...)...)
}

// CreateTopic creates a topic; an existing topic is not an error.
func (k *Kafka) CreateTopic(ctx context.Context, topic string, partitions int32) error {
	cl, err := k.Client()
	if err != nil {
		return err
	}
	defer cl.Close()
	resp, err := kadm.NewClient(cl).CreateTopic(ctx, partitions, 1, nil, topic)
	if err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
		return fmt.Errorf("devenv: create topic %s: %w", topic, err)
	}
	if resp.Err != nil && !errors.Is(resp.Err, kerr.TopicAlreadyExists) {
		return fmt.Errorf("devenv: create topic %s: %w", topic, resp.Err)
	}
	return nil
}

// NewKafka starts a kfake cluster for the test, persisted in a temporary
// directory, and closes it when the test ends.
func NewKafka(tb testing.TB, cfg KafkaConfig) *Kafka {
	tb.Helper()
	if cfg.DataDir == "" {
		cfg.DataDir = tb.TempDir()
	}
	k, err := StartKafka(cfg)
	if err != nil {
		tb.Fatalf("devenv: %v", err)
	}
	tb.Cleanup(k.Close)
	return k
}
