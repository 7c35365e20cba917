package sigd

import (
	"github.com/sigdata/sig/matching/canon"
	"github.com/sigdata/sig/workers"
)

// taskID and taskKey are where sigd converts between a memo entry's
// (component, block) and the work queues' workers.TaskID; nothing else in
// sigd builds a TaskID or reads its Component.
//
// TaskID.Component becomes a canon.Key (branch i17-queue): then these are
// a struct literal and a field access. Until it does, the queue holds the
// key in hex, and these two lines are the only format and parse of a key
// between sigd and its queue.
func taskID(k canon.Key, block string) workers.TaskID {
	return workers.TaskID{Component: k.String(), Block: block}
}

// taskKey is the component of a task the queue holds: every TaskID in it
// was made by taskID (remote workers name a task by its lease only).
func taskKey(id workers.TaskID) canon.Key {
	k, _ := canon.ParseKey(id.Component)
	return k
}
