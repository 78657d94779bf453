package proxy

// Accessors only tests use, for what the proxy keeps unexported.

import "time"

// testingOnlySetDeliveredKeep sets how long a delivered stream is kept,
// for the streams kept already too.
func (k *keptStreams) testingOnlySetDeliveredKeep(d time.Duration) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.testingOnlyDeliveredKeep = d
	if k.timer != nil {
		k.timer.Reset(0)
	}
}

// size is the number of parked calls not ended, for tests.
func (t *parking) size() (waiting, live int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.m), t.live
}

func (n *newerSession) isRefused() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.refused
}

// inProgress returns how many of the session's POSTs are in progress.
func (fs *frontSession) inProgress() int { return int(fs.use.Load() & useActive) }

// droppedTotal is how many notifications l dropped.
func (l *lineWriter) droppedTotal() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.drops.total
}
