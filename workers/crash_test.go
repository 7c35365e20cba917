package workers

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"

	"github.com/sigdata/sig/internal/clock"
	"github.com/sigdata/sig/warehouse/blockref"
)

const crashDirEnv = "SIG_WORKERS_CRASH_DIR"

// TestCrashChild is the process TestSIGKILLLosesNothing kills. It enqueues
// tasks and completes some, printing each change once it is acknowledged,
// until it is killed.
func TestCrashChild(t *testing.T) {
	dir := os.Getenv(crashDirEnv)
	if dir == "" {
		t.Skip("only run as TestSIGKILLLosesNothing's child")
	}
	q, err := Open(dir, Options{Clock: clock.Real{}})
	if err != nil {
		fmt.Println("error", err)
		os.Exit(1)
	}
	ctx := context.Background()
	for i := 0; ; i++ {
		id := TaskID{Component: numKey(i % 17), Block: blockref.ParseMemo(fmt.Sprint(i))}
		if _, err := q.Enqueue(Request{Task: id, Client: fmt.Sprintf("c%d", i%3), Pipeline: "p", Priority: int32(i % 4)}); err != nil {
			fmt.Println("error", err)
			os.Exit(1)
		}
		fmt.Println("enq", id)
		if i%3 != 0 {
			continue
		}
		l, ok, err := q.TryLease("w")
		if err != nil || !ok {
			fmt.Println("error", ok, err)
			os.Exit(1)
		}
		// A kill between Complete and its acknowledgement may or may not
		// find the completion durable: the parent must know it was under way.
		fmt.Println("completing", l.Task.ID)
		if err := q.Complete(ctx, l.ID, Result{}); err != nil {
			fmt.Println("error", err)
			os.Exit(1)
		}
		fmt.Println("done", l.Task.ID)
	}
}

// TestSIGKILLLosesNothing kills a process in the middle of a stream of
// queue changes and reopens its store: every acknowledged enqueue is there
// and every acknowledged completion is gone. This is what the default
// durability (DurabilityProcess) promises; Pebble's NoSync would not keep
// it, since it buffers WAL records in the process.
func TestSIGKILLLosesNothing(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a subprocess")
	}
	for round := 0; round < 3; round++ {
		dir := t.TempDir()
		cmd := exec.Command(os.Args[0], "-test.run=^TestCrashChild$", "-test.count=1")
		cmd.Env = append(os.Environ(), crashDirEnv+"="+dir)
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		enqueued := map[string]bool{}
		completing := map[string]bool{} // Complete called, perhaps durable
		done := map[string]bool{}
		sc := bufio.NewScanner(out)
		killAt := 500 + 700*round
		n := 0
		for sc.Scan() {
			f := strings.Fields(sc.Text())
			switch {
			case len(f) == 2 && f[0] == "enq":
				enqueued[f[1]] = true
			case len(f) == 2 && f[0] == "completing":
				completing[f[1]] = true
			case len(f) == 2 && f[0] == "done":
				done[f[1]] = true
			case len(f) > 0 && f[0] == "error":
				t.Fatalf("child: %s", sc.Text())
			}
			if n++; n == killAt {
				// Acknowledged lines already in the pipe are read below.
				if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
					t.Fatal(err)
				}
			}
		}
		cmd.Wait()
		if n < killAt {
			t.Fatalf("child stopped after %d lines", n)
		}

		q, err := Open(dir, Options{Clock: clock.NewFake(t0)})
		if err != nil {
			t.Fatalf("reopen after SIGKILL: %v", err)
		}
		present := map[string]bool{}
		for id := range q.st.tasks {
			present[id.String()] = true
		}
		q.Close()
		for id := range enqueued {
			if !completing[id] && !present[id] {
				t.Errorf("round %d: acknowledged task %s lost", round, id)
			}
		}
		for id := range done {
			if present[id] {
				t.Errorf("round %d: acknowledged completion of %s lost", round, id)
			}
		}
		t.Logf("round %d: killed after %d acknowledged changes; %d tasks survived", round, n, len(present))
	}
}
